#!/usr/bin/env python3
"""Runs every query of Grafana dashboards against a real Prometheus server.

For each dashboard JSON given (a Grafana dashboard model, or any JSON with
the same `panels[].targets[].expr` and `templating.list[]` shape), this
resolves the template variables and sends every panel query to Prometheus
the way Grafana's Prometheus data source would, then prints one line per
check, `PASS  ...` or `FAIL  ...`:

- each query variable (`label_values(...)`) returns at least one value;
- each panel target is accepted (HTTP 200, `"status": "success"`) and
  returns data: at least one sample with a finite value.

How the variables are substituted (Grafana's rules, for a Prometheus data
source whose scrape interval is set to the server's):

- query variables (`label_values(metric{...}, label)`), in dashboard order,
  through `/api/v1/label/<label>/values?match[]=...` over the time range,
  each interpolated with the variables before it; every variable is set to
  "All", i.e. every value found. A multi-value or include-all variable is
  written, as Grafana writes it, regex-escaped (`\\\\` before each of
  `$^*{}[]+?.()|`, backslashes doubled twice) and joined as `(a|b)` when
  there are several values; a single-value variable has only `\\` and `'`
  escaped.
- `custom`, `textbox` and `constant` variables: the value given with
  `--set NAME=VALUE`, else the current value, else the first option.
- `datasource` and `adhoc` variables: nothing (no ad hoc filter is set).
- `$__range` (`_s`, `_ms`): the time range, `--end - --start`.
- `$__interval` (`_ms`): `max(scrape interval, range / --max-data-points)`,
  in whole seconds; `$__rate_interval`: `max($__interval + scrape interval,
  4 * scrape interval)`.
- `$name`, `${name}` and `[[name]]` forms; `${name:format}` is an error (no
  dashboard here uses one). A `$` not followed by a known name (the `$1` of
  `label_replace`) is left alone, as Grafana leaves it.

Range targets (Grafana's default, `"range": true` or no flag) are sent to
`/api/v1/query_range` from `--start` to `--end` with step `$__interval`,
aligned to the step as Grafana aligns them; instant targets
(`"instant": true`, `"range": false`) to `/api/v1/query` at `--end`.

    python3 .ci/dashboard-queries.py --prometheus http://127.0.0.1:9090 \\
        --start 1700000000 --end 1700000030 --scrape-interval 1 \\
        --set prefix=vllm:spec_decode dashboards/specdec-metrics.json

`--self-test` checks the substitution rules above without a server.
Exit status 0 when every check passed, 1 otherwise, 2 on bad arguments.
"""

import argparse
import json
import math
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

# Grafana's variable syntax: $name, [[name]] or [[name:format]], ${name},
# ${name.field} or ${name:format}.
VARIABLE = re.compile(
    r"\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^\}]+))?(?::([^\}]+))?\}"
)
REGEX_SPECIAL = re.compile(r"[$^*{}\[\]+?.()|]")
LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?:(.*),\s*)?(\w+)\s*\)\s*$", re.S)


def regular_escape(value):
    """prometheusRegularEscape: for a single-value variable."""
    return value.replace("\\", "\\\\").replace("'", "\\\\'")


def regex_escape(value):
    """prometheusSpecialRegexEscape: for a multi-value or include-all one."""
    return REGEX_SPECIAL.sub(lambda m: "\\\\" + m.group(0), value.replace("\\", "\\\\\\\\"))


def format_variable(values, multi):
    """What Grafana writes into a Prometheus query for a variable."""
    if not multi:
        return regular_escape(values[0]) if values else ""
    escaped = [regex_escape(v) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def builtins(range_s, scrape_s, max_data_points):
    interval_s = max(scrape_s, math.ceil(range_s / max_data_points))
    rate_s = max(interval_s + scrape_s, 4 * scrape_s)
    return {
        "__range": "%ds" % range_s,
        "__range_s": str(range_s),
        "__range_ms": str(range_s * 1000),
        "__interval": "%ds" % interval_s,
        "__interval_ms": str(interval_s * 1000),
        "__rate_interval": "%ds" % rate_s,
    }, interval_s


def interpolate(text, variables, builtin):
    """Substitutes every known variable in text; leaves other `$...` alone."""

    def one(m):
        name = m.group(1) or m.group(2) or m.group(4)
        fmt = m.group(3) or m.group(6)
        if m.group(5):
            raise ValueError("${%s.%s}: field access is not supported" % (name, m.group(5)))
        if name in builtin:
            return builtin[name]
        if name not in variables:
            return m.group(0)
        if fmt:
            raise ValueError("${%s:%s}: variable formats are not supported" % (name, fmt))
        values, multi = variables[name]
        return format_variable(values, multi)

    return VARIABLE.sub(one, text)


class Prometheus:
    def __init__(self, url):
        self.url = url.rstrip("/")

    def get(self, path, params):
        """(http status, parsed JSON or None, error text)."""
        query = urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen("%s%s?%s" % (self.url, path, query), timeout=10) as r:
                return r.status, json.load(r), ""
        except urllib.error.HTTPError as e:
            body = e.read().decode("utf-8", "replace")
            try:
                return e.code, json.loads(body), body
            except ValueError:
                return e.code, None, body
        except (urllib.error.URLError, OSError, ValueError) as e:
            return 0, None, str(e)


def finite_points(result_type, result):
    """Number of finite sample values in a query result."""
    def finite(v):
        try:
            return math.isfinite(float(v[1]))
        except (TypeError, ValueError, IndexError):
            return False

    if result_type == "matrix":
        return sum(1 for s in result for v in s.get("values", []) if finite(v))
    if result_type == "vector":
        return sum(1 for s in result if finite(s.get("value")))
    if result_type == "scalar":
        return 1 if finite(result) else 0
    return 0


def check_dashboard(path, prom, args, report):
    try:
        dashboard = json.load(open(path))
    except (OSError, ValueError) as e:
        report(False, "%s: cannot read the dashboard: %s" % (path, e))
        return
    title = dashboard.get("title") or path
    range_s = args.end - args.start
    builtin, step = builtins(range_s, args.scrape_interval, args.max_data_points)
    overrides = dict(s.split("=", 1) for s in args.set)

    variables = {}
    for var in dashboard.get("templating", {}).get("list", []):
        name, kind = var.get("name"), var.get("type")
        multi = bool(var.get("multi") or var.get("includeAll"))
        if kind in ("datasource", "adhoc", "interval"):
            continue
        if kind in ("custom", "textbox", "constant"):
            if name in overrides:
                value = overrides[name]
            else:
                current = var.get("current", {}).get("value")
                options = [o.strip() for o in str(var.get("query", "")).split(",") if o.strip()]
                value = current if isinstance(current, str) and current else (options[0] if options else "")
            variables[name] = ([value], multi)
            continue
        if kind != "query":
            report(False, "%s: variable $%s: type %r not supported" % (title, name, kind))
            continue
        query = var.get("query")
        if isinstance(query, dict):
            query = query.get("query", "")
        try:
            expanded = interpolate(query, variables, builtin)
        except ValueError as e:
            report(False, "%s: variable $%s: %s" % (title, name, e))
            continue
        m = LABEL_VALUES.match(expanded)
        if not m:
            report(False, "%s: variable $%s: only label_values(...) is supported: %s" % (title, name, query))
            continue
        selector, label = m.group(1), m.group(2)
        params = {"start": args.start, "end": args.end}
        if selector:
            params["match[]"] = selector.strip()
        status, body, err = prom.get("/api/v1/label/%s/values" % label, params)
        values = sorted(body.get("data") or []) if status == 200 and body and body.get("status") == "success" else []
        variables[name] = (values, multi)
        if values:
            report(True, "%s: variable $%s = %s  <- %s" % (title, name, values, expanded))
        else:
            report(False, "%s: variable $%s has no values (HTTP %s %s) <- %s" % (title, name, status, err[:200], expanded))

    for panel in dashboard.get("panels", []):
        # Panels inside collapsed rows sit in the row's own "panels".
        for p in [panel] + panel.get("panels", []):
            for target in p.get("targets", []):
                expr = target.get("expr")
                if not expr:
                    continue
                what = "%s: panel %s %r %s" % (title, p.get("id"), p.get("title"), target.get("refId", ""))
                try:
                    q = interpolate(expr, variables, builtin)
                except ValueError as e:
                    report(False, "%s: %s" % (what, e))
                    continue
                instant = bool(target.get("instant")) and not target.get("range", False)
                if instant:
                    status, body, err = prom.get("/api/v1/query", {"query": q, "time": args.end})
                else:
                    start = math.floor(args.start / step) * step
                    end = math.ceil(args.end / step) * step
                    status, body, err = prom.get(
                        "/api/v1/query_range", {"query": q, "start": start, "end": end, "step": step}
                    )
                ok = status == 200 and body is not None and body.get("status") == "success"
                if not ok:
                    detail = (body or {}).get("error") or err
                    report(False, "%s: rejected (HTTP %s): %s\n      %s" % (what, status, detail[:300], q))
                    continue
                data = body["data"]
                points = finite_points(data.get("resultType"), data.get("result"))
                series = len(data["result"]) if isinstance(data.get("result"), list) else 1
                kind = "instant" if instant else "range"
                if points:
                    report(True, "%s: %s query, %d series, %d points" % (what, kind, series, points))
                else:
                    report(False, "%s: %s query accepted but returned no data\n      %s" % (what, kind, q))


def self_test():
    """The substitution rules, on cases whose Grafana output is known."""
    b, step = builtins(30, 1, 1000)
    assert (b["__interval"], b["__rate_interval"], b["__range"], step) == ("1s", "4s", "30s", 1), b
    b, step = builtins(3600, 15, 100)
    assert (b["__interval"], b["__rate_interval"], step) == ("36s", "60s", 36), b
    v = {"job": (["serving_engine"], True), "instance": (["127.0.0.1:9464", "h:1"], True),
         "prefix": (["vllm:spec_decode"], False), "odd": (["a\\b'c"], False)}
    got = interpolate('${prefix}_x{job=~"$job", instance=~"$instance"}[$__rate_interval]', v, b)
    assert got == 'vllm:spec_decode_x{job=~"serving_engine", instance=~"(127\\\\.0\\\\.0\\\\.1:9464|h:1)"}[60s]', got
    assert interpolate("[[job]] $odd", v, b) == "serving_engine a\\\\b\\\\'c"
    # label_replace's $1 and unknown names are left as they are.
    assert interpolate('label_replace(x, "a", "$1", "b", "(.+)") $unknown', v, b) == \
        'label_replace(x, "a", "$1", "b", "(.+)") $unknown'
    assert regex_escape("a\\b") == "a\\\\\\\\b"
    for bad in ("${job:csv}", "${job.text}"):
        try:
            interpolate(bad, v, b)
        except ValueError:
            continue
        raise AssertionError("%s should be rejected" % bad)
    m = LABEL_VALUES.match('label_values(vllm:num_requests_running{job=~"x"}, model_name)')
    assert m and m.group(1) == 'vllm:num_requests_running{job=~"x"}' and m.group(2) == "model_name"
    m = LABEL_VALUES.match("label_values(job)")
    assert m and m.group(1) is None and m.group(2) == "job"
    assert finite_points("matrix", [{"values": [[1, "NaN"], [2, "1"]]}, {"values": [[1, "+Inf"]]}]) == 1
    assert finite_points("vector", [{"value": [1, "NaN"]}]) == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dashboards", nargs="*")
    ap.add_argument("--prometheus", help="base URL of the Prometheus server")
    ap.add_argument("--start", type=int, help="time range start (Unix seconds)")
    ap.add_argument("--end", type=int, help="time range end (Unix seconds)")
    ap.add_argument("--scrape-interval", type=int, default=15, help="seconds (default 15)")
    ap.add_argument("--max-data-points", type=int, default=1000, help="panel width (default 1000)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="value of a custom/textbox/constant variable")
    ap.add_argument("--self-test", action="store_true", help="check the substitution rules and exit")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        print("PASS  dashboard-queries.py self-test: Grafana's variable substitution rules")
        return 0
    if not args.dashboards or args.prometheus is None or args.start is None or args.end is None:
        ap.error("dashboards, --prometheus, --start and --end are required")
    if args.end <= args.start or args.scrape_interval < 1 or any("=" not in s for s in args.set):
        ap.error("need --end > --start, --scrape-interval >= 1 and --set NAME=VALUE")
    failed = 0

    def report(ok, line):
        nonlocal failed
        failed += not ok
        print(("PASS  " if ok else "FAIL  ") + line, flush=True)

    prom = Prometheus(args.prometheus)
    for path in args.dashboards:
        check_dashboard(path, prom, args, report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
