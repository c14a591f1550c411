#!/usr/bin/env python3
"""Helpers of scripts/corpus (Python 3, standard library only).

  corpus_tool.py half NAME...
      Prints "NAME<TAB>HALF" for each NAME of one group, by the split rule
      below.
  corpus_tool.py agent-units FILE...
      Prints "FILE<TAB>UNIT<TAB>HALF" for the units (tasks) of each
      trajectory file.
  corpus_tool.py agent --half tuning|report [--prompt] FILE
      Writes ngram's requests ({"id", "messages", "output"}, JSON Lines) on
      standard output: one per model call of the file's tasks in that half.
      With --prompt, each conversation rendered whole instead ({"id",
      "prompt", "output"}: the same text, tokenized whole).
  corpus_tool.py sample N < TRACE > TRACE
      Keeps a trace's metadata line and at most N requests: those whose
      id (a string; other ids as JSON) has the smallest SHA-256, in their
      order.
  corpus_tool.py stats OUT
      Prints, per half and regime, the units, requests, positions and bytes
      of the traces under OUT/<half>/<regime>/, and the build seconds from
      OUT/build-times.tsv.

The split rule, fixed before any tuning: within one group (a language of
the manifest, or one trajectory file), order the members by the SHA-256 of
their name (lowercase hex of the UTF-8 bytes, no newline); the 1st, 3rd,
5th ... are the tuning half, the 2nd, 4th ... the report half.

Agent trajectories: tau-bench's historical_trajectories/*.json (a list of
runs {"task_id", "trial", "traj": [messages]}, OpenAI chat messages). A unit
is one task of one file (every trial of it), named "<file stem>/task-<id>";
one request per assistant message: the prompt is the conversation before it
(every message, rendered in a ChatML-like template, then the assistant's
header), the output the assistant's text and its tool calls. The requests
give the conversation as "messages" ({"role", "content"}: the role as
rendered, "tool name=NAME" for a tool's result, the content with the tool
calls), which ngram renders in the same template and tokenizes one message
at a time, each message once per conversation; --prompt gives the rendered
text instead.
"""

import hashlib
import json
import os
import sys


def key(name):
    return hashlib.sha256(name.encode("utf-8")).hexdigest()


def halves(names):
    """{name: "tuning" | "report"} for the members of one group."""
    ordered = sorted(set(names), key=key)
    return {n: ("tuning" if i % 2 == 0 else "report") for i, n in enumerate(ordered)}


def die(msg):
    sys.stderr.write("corpus_tool.py: error: %s\n" % msg)
    sys.exit(2)


def load_runs(path):
    try:
        with open(path, encoding="utf-8") as f:
            runs = json.load(f)
    except (OSError, ValueError) as e:
        die("%s: cannot read trajectories: %s" % (path, e))
    if not isinstance(runs, list) or not all(
        isinstance(r, dict) and isinstance(r.get("traj"), list) and "task_id" in r for r in runs
    ):
        die("%s: not tau-bench trajectories (a list of {task_id, trial, traj})" % path)
    return runs


def stem(path):
    base = os.path.basename(path)
    return base[:-5] if base.endswith(".json") else base


def units(path, runs):
    return {"%s/task-%s" % (stem(path), r["task_id"]) for r in runs}


def render_call(call):
    fn = call.get("function", {}) if isinstance(call, dict) else {}
    args = fn.get("arguments", "")
    try:
        args = json.loads(args) if isinstance(args, str) else args
    except ValueError:
        pass
    return "<tool_call>\n%s\n</tool_call>" % json.dumps(
        {"name": fn.get("name"), "arguments": args}, ensure_ascii=False
    )


def body(message):
    parts = []
    if isinstance(message.get("content"), str) and message["content"]:
        parts.append(message["content"])
    for call in message.get("tool_calls") or []:
        parts.append(render_call(call))
    return "\n".join(parts)


def role_of(message):
    role = message.get("role", "unknown")
    if role == "tool" and message.get("name"):
        role = "tool name=%s" % message["name"]
    return role


def render(message):
    return "<|im_start|>%s\n%s<|im_end|>\n" % (role_of(message), body(message))


def agent(path, half, whole):
    runs = load_runs(path)
    split = halves(units(path, runs))
    out = sys.stdout
    for run in runs:
        unit = "%s/task-%s" % (stem(path), run["task_id"])
        if split[unit] != half:
            continue
        context = []
        turns = []
        for i, message in enumerate(run["traj"]):
            if not isinstance(message, dict):
                die("%s: %s: a message that is not an object" % (path, unit))
            if message.get("role") == "assistant":
                output = body(message)
                if output:
                    request = {"id": "%s/trial-%s/call-%d" % (unit, run.get("trial", 0), i)}
                    if whole:
                        request["prompt"] = "".join(context) + "<|im_start|>assistant\n"
                    else:
                        request["messages"] = list(turns)
                    request["output"] = output
                    out.write(json.dumps(request, ensure_ascii=False) + "\n")
            context.append(render(message))
            turns.append({"role": role_of(message), "content": body(message)})


def sample(n):
    lines = sys.stdin.buffer.read().splitlines(keepends=True)
    if not lines:
        return
    head, requests = lines[0], lines[1:]
    keyed = []
    for i, line in enumerate(requests):
        ident = json.loads(line).get("id")
        keyed.append((key(ident if isinstance(ident, str) else json.dumps(ident)), i))
    kept = sorted(i for _, i in sorted(keyed)[:n])
    out = sys.stdout.buffer
    out.write(head)
    for i in kept:
        out.write(requests[i])


def stats(root):
    seconds = {}
    times = os.path.join(root, "build-times.tsv")
    if os.path.exists(times):
        with open(times, encoding="utf-8") as f:
            for row in f:
                fields = row.rstrip("\n").split("\t")
                if len(fields) >= 4 and fields[0] != "half":
                    k = (fields[0], fields[1])
                    seconds[k] = seconds.get(k, 0.0) + float(fields[3])
    print("half\tregime\tunits\trequests\tpositions\tbytes\tbuild_seconds")
    for half in ("tuning", "report"):
        for regime in ("short", "long", "agent", "chat"):
            d = os.path.join(root, half, regime)
            if not os.path.isdir(d):
                continue
            files = requests = positions = size = 0
            for name in sorted(os.listdir(d)):
                if not name.endswith(".jsonl"):
                    continue
                path = os.path.join(d, name)
                files += 1
                size += os.path.getsize(path)
                with open(path, "rb") as f:
                    for line in f:
                        request = json.loads(line)
                        if "specdec_trace" in request:
                            continue  # the metadata line
                        requests += 1
                        # "match": the older name, in traces made before.
                        positions += len(request.get("matched", request.get("match", [])))
            print(
                "%s\t%s\t%d\t%d\t%d\t%d\t%.1f"
                % (half, regime, files, requests, positions, size, seconds.get((half, regime), 0.0))
            )


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return
    cmd, rest = argv[1], argv[2:]
    if cmd == "half":
        for name, half in sorted(halves(rest).items()):
            print("%s\t%s" % (name, half))
    elif cmd == "agent-units":
        for path in rest:
            for unit, half in sorted(halves(units(path, load_runs(path))).items(), key=lambda x: key(x[0])):
                print("%s\t%s\t%s" % (path, unit, half))
    elif cmd == "agent":
        whole = "--prompt" in rest
        rest = [a for a in rest if a != "--prompt"]
        if len(rest) != 3 or rest[0] != "--half" or rest[1] not in ("tuning", "report"):
            die("usage: corpus_tool.py agent --half tuning|report [--prompt] FILE")
        agent(rest[2], rest[1], whole)
    elif cmd == "sample":
        if len(rest) != 1 or not rest[0].isdigit():
            die("usage: corpus_tool.py sample N < TRACE")
        sample(int(rest[0]))
    elif cmd == "stats":
        if len(rest) != 1:
            die("usage: corpus_tool.py stats OUT")
        stats(rest[0])
    else:
        die("unknown command %r (try --help)" % cmd)


if __name__ == "__main__":
    main(sys.argv)
