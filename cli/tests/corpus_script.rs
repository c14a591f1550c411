//! `scripts/corpus`: the committed manifest splits every language into a
//! tuning half and a report half by the rule written in the script, and a
//! build makes the three regimes' traces from mirrors (here a repository
//! made by the test) with the command line under test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn corpus(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(repo_root().join("scripts/corpus"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `split`'s rows: (half, name, language, repository, commit).
fn split(args: &[&str]) -> Vec<[String; 5]> {
    let out = corpus(&[&["split"], args].concat());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some("half\tname\tlanguage\trepository\tcommit\tfrom\tto")
    );
    lines
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 7, "{l:?}");
            [f[0], f[1], f[2], f[3], f[4]].map(str::to_owned)
        })
        .collect()
}

#[test]
fn the_committed_manifest_puts_every_language_in_both_halves() {
    let rows = split(&[]);
    assert!(rows.len() >= 24, "{} repositories", rows.len());
    let mut by_language: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for [half, _, language, _, _] in &rows {
        let counts = by_language.entry(language).or_default();
        match half.as_str() {
            "tuning" => counts.0 += 1,
            "report" => counts.1 += 1,
            other => panic!("half {other:?}"),
        }
    }
    assert!(by_language.len() >= 6, "{by_language:?}");
    for (language, (tuning, report)) in &by_language {
        assert!(
            *tuning >= 2 && *report >= 2,
            "{language}: {tuning} tuning, {report} report"
        );
    }
    let names: BTreeSet<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(names.len(), rows.len(), "names are unique");
    for [_, name, _, repo, commit] in &rows {
        assert!(
            commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
            "{name}: commit {commit:?}"
        );
        // The old defaults were tuned on these: never in the corpus.
        let repo = repo.to_lowercase();
        for tuned_on in [
            "burntsushi/ripgrep",
            "psf/requests",
            "jqlang/jq",
            "stedolan/jq",
        ] {
            assert_ne!(repo, tuned_on);
        }
    }
}

/// A manifest of the rows `(name, language)`.
fn manifest(dir: &Path, rows: &[(&str, &str)]) -> PathBuf {
    let path = dir.join("manifest.tsv");
    let mut text = "name\tlanguage\trepository\tcommit\tfrom\tto\n".to_owned();
    for (name, language) in rows {
        text.push_str(&format!(
            "{name}\t{language}\towner/{name}\t{}\tv1\tv2\n",
            "0".repeat(40)
        ));
    }
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_split_alternates_down_the_sha256_order_within_each_language() {
    // SHA-256 order: d c b e a (18ac.., 2e7d.., 3e23.., 3f79.., ca97..) and
    // s p r q (043a.., 148d.., 4543.., 8e35..).
    let dir = TempDir::new().unwrap();
    let rows: Vec<(&str, &str)> = ["a", "b", "c", "d", "e"]
        .into_iter()
        .map(|n| (n, "X"))
        .chain(["p", "q", "r", "s"].into_iter().map(|n| (n, "Y")))
        .collect();
    let path = manifest(dir.path(), &rows);
    let halves: BTreeMap<String, String> = split(&["--manifest", path.to_str().unwrap()])
        .into_iter()
        .map(|[half, name, ..]| (name, half))
        .collect();
    let tuning: BTreeSet<&str> = halves
        .iter()
        .filter(|(_, h)| *h == "tuning")
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(
        tuning,
        BTreeSet::from(["a", "b", "d", "r", "s"]),
        "{halves:?}"
    );
    assert_eq!(halves.len(), 9);
}

fn git(dir: &Path, args: &[&str]) {
    git_at(dir, None, args);
}

/// `git` with the committer's date set (a tag's creator date is its
/// commit's), so that the tags' order by date is the order written.
fn git_at(dir: &Path, date: Option<&str>, args: &[&str]) {
    let mut command = Command::new("git");
    if let Some(date) = date {
        command.env("GIT_COMMITTER_DATE", date);
    }
    let status = command
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "tag.gpgSign=false",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "git {args:?}: {}",
        text(&status.stderr)
    );
}

fn requests(trace: &Path) -> Vec<serde_json::Value> {
    let text =
        std::fs::read_to_string(trace).unwrap_or_else(|e| panic!("{}: {e}", trace.display()));
    text.lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_build_makes_each_regimes_traces_from_mirrors() {
    let dir = TempDir::new().unwrap();
    let mirrors = dir.path().join("mirrors");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q"]);
    let body = |n: usize| -> String { (0..n).map(|i| format!("line {i}\n")).collect() };
    std::fs::write(work.join("a.txt"), body(10)).unwrap();
    std::fs::write(work.join("c.txt"), body(5)).unwrap();
    git(&work, &["add", "."]);
    // Dates out of the tags' name order: "v10" sorts before "v2" by name,
    // and comes after it by date.
    git_at(
        &work,
        Some("2020-01-01T00:00:00Z"),
        &["commit", "-qm", "first"],
    );
    git(&work, &["tag", "v1"]);
    // Tags dated before v1, of its commit and of v2's: not after FROM in
    // the dates' order, so not releases of the range.
    git_at(
        &work,
        Some("2019-12-30T00:00:00Z"),
        &["tag", "-a", "v0", "-m", "older name"],
    );
    for (n, day) in [(11, 2), (12, 3), (13, 4)] {
        std::fs::write(work.join("a.txt"), body(n)).unwrap();
        git_at(
            &work,
            Some(&format!("2020-01-0{day}T00:00:00Z")),
            &["commit", "-qam", &format!("grow to {n}")],
        );
        if n == 11 {
            git(&work, &["tag", "v2"]);
            git_at(
                &work,
                Some("2019-12-31T00:00:00Z"),
                &["tag", "-a", "early", "-m", "dated before v1"],
            );
            // A maintenance release of the v1 line, dated after v2 and
            // merged in before v10: v2 is not its ancestor, so it is no
            // release of the chain (v2..v1.1 would be an edit backwards).
            git(&work, &["checkout", "-q", "-b", "maintenance", "v1"]);
            std::fs::write(work.join("c.txt"), body(6)).unwrap();
            git_at(
                &work,
                Some("2020-01-02T12:00:00Z"),
                &["commit", "-qam", "fix c"],
            );
            git(&work, &["tag", "v1.1"]);
            git(&work, &["checkout", "-q", "-"]);
        }
        if n == 12 {
            git_at(
                &work,
                Some("2020-01-03T12:00:00Z"),
                &["merge", "-q", "--no-ff", "-m", "merge v1.1", "maintenance"],
            );
        }
    }
    git(&work, &["tag", "v10"]);
    // A later commit the manifest does not pin: the short regime stops at
    // the manifest's commit.
    std::fs::write(work.join("a.txt"), body(14)).unwrap();
    git(&work, &["commit", "-qam", "after the snapshot"]);
    let pinned = {
        let out = Command::new("git")
            .arg("-C")
            .arg(&work)
            .args(["rev-parse", "v10"])
            .output()
            .unwrap();
        text(&out.stdout).trim().to_owned()
    };
    std::fs::create_dir_all(mirrors.join("owner")).unwrap();
    let status = Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(&work)
        .arg(mirrors.join("owner/tiny.git"))
        .status()
        .unwrap();
    assert!(status.success());
    let manifest = dir.path().join("manifest.tsv");
    std::fs::write(
        &manifest,
        format!("name\tlanguage\trepository\tcommit\tfrom\tto\ntiny\tText\towner/tiny\t{pinned}\tv1\tv10\n"),
    )
    .unwrap();
    let agent = dir.path().join("mini.json");
    let traj = |task: u32| {
        serde_json::json!({"task_id": task, "trial": 0, "traj": [
            {"role": "system", "content": "policy"},
            {"role": "user", "content": "book a flight"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "find", "arguments": "{\"to\":\"SEA\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "find", "content": "HAT1 to SEA"},
            {"role": "assistant", "content": "HAT1 to SEA is free."},
        ]})
    };
    std::fs::write(&agent, serde_json::json!([traj(0), traj(1)]).to_string()).unwrap();
    let out_dir = dir.path().join("out");
    let bin = assert_cmd::cargo::cargo_bin!("specdec-metrics");
    // `build` of the manifest with this binary into `out`, from `mirrors`.
    let build = |mirrors: Option<&Path>, out: &Path, more: &[&str]| {
        let mut args = vec!["build", "--manifest", manifest.to_str().unwrap()];
        if let Some(m) = mirrors {
            args.extend(["--mirrors", m.to_str().unwrap()]);
        }
        args.extend([
            "--out",
            out.to_str().unwrap(),
            "--bin",
            bin.to_str().unwrap(),
        ]);
        args.extend(more);
        corpus(&args)
    };
    let agent_arg = agent.to_str().unwrap();
    let out = build(
        Some(&mirrors),
        &out_dir,
        &["--max-short", "5", "--agent", agent_arg],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // Three commits edit a.txt and one c.txt up to the pinned one (not the
    // merge, nor the commit after it); a sample of two keeps the meta line
    // and two of them, in order.
    let short_path = out_dir.join("tuning/short/tiny.jsonl");
    let short = requests(&short_path);
    assert_eq!(short.len(), 4, "{short:?}");
    let sampled = Command::new("sh")
        .arg("-c")
        .arg("python3 \"$0\" sample 2 < \"$1\"")
        .arg(repo_root().join("scripts/corpus_tool.py"))
        .arg(&short_path)
        .output()
        .unwrap();
    assert_eq!(sampled.status.code(), Some(0), "{}", text(&sampled.stderr));
    let sampled = text(&sampled.stdout);
    let full = std::fs::read_to_string(&short_path).unwrap();
    let mut lines = sampled.lines();
    assert_eq!(lines.next(), full.lines().next());
    let kept: Vec<&str> = lines.collect();
    assert_eq!(kept.len(), 2);
    let positions: Vec<usize> = kept
        .iter()
        .map(|k| full.lines().position(|l| l == *k).unwrap())
        .collect();
    assert!(positions[0] < positions[1], "in their order");
    // One long edit per file and consecutive pair of releases from v1 to
    // v10, in the releases' order (v0, early and v1.1 are not among them): a.txt
    // from v1 to v2, then a.txt and c.txt from v2 to v10.
    let long = requests(&out_dir.join("tuning/long/tiny.jsonl"));
    let ids: Vec<&str> = long.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["v1..v2:a.txt", "v2..v10:a.txt", "v2..v10:c.txt"]);
    let long_text = std::fs::read_to_string(out_dir.join("tuning/long/tiny.jsonl")).unwrap();
    assert_eq!(
        long_text.matches("specdec_trace").count(),
        1,
        "one header: {long_text}"
    );
    // The file at v2 (11 lines) is the second edit's prompt: longer than
    // the first's, the file at v1 (10 lines).
    let prompt = |r: &serde_json::Value| r["prompt_tokens"].as_u64().unwrap();
    assert!(prompt(&long[1]) > prompt(&long[0]), "{long:?}");
    // The same long edit with suffix decoding, into another directory: the
    // same requests, the rule in the metadata, each draft's score.
    let suffix_dir = dir.path().join("out-suffix");
    let built = build(
        Some(&mirrors),
        &suffix_dir,
        &["--regimes", "long", "--rule", "suffix"],
    );
    assert_eq!(built.status.code(), Some(0), "{}", text(&built.stderr));
    let suffix_trace = std::fs::read_to_string(suffix_dir.join("tuning/long/tiny.jsonl")).unwrap();
    let meta: serde_json::Value =
        serde_json::from_str(suffix_trace.lines().next().unwrap()).unwrap();
    assert_eq!(
        (meta["rule"].as_str(), meta["cap"].as_u64()),
        (Some("suffix"), Some(24))
    );
    let suffix_long = requests(&suffix_dir.join("tuning/long/tiny.jsonl"));
    assert_eq!(suffix_long[0]["id"], long[0]["id"]);
    assert!(suffix_long[0]["score"].is_array(), "{:?}", suffix_long[0]);
    let refused = corpus(&[
        "build",
        "--out",
        suffix_dir.to_str().unwrap(),
        "--rule",
        "eagle",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("--rule eagle: unknown rule"),
        "{}",
        text(&refused.stderr)
    );
    // Task 0 is tuning, task 1 report (SHA-256 of "mini/task-0", 26c2..,
    // before "mini/task-1", e9d3..); two model calls each.
    for (half, task) in [("tuning", 0), ("report", 1)] {
        let agent = requests(&out_dir.join(format!("{half}/agent/mini.jsonl")));
        let ids: Vec<&str> = agent.iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(
            ids,
            [
                format!("mini/task-{task}/trial-0/call-2"),
                format!("mini/task-{task}/trial-0/call-4")
            ]
        );
    }
    // The converter: the conversation so far as the prompt (with
    // --prompt) or as its messages (by default), the call as the output.
    let convert = |flags: &[&str]| -> Vec<serde_json::Value> {
        let converted = Command::new("python3")
            .arg(repo_root().join("scripts/corpus_tool.py"))
            .args(["agent", "--half", "tuning"])
            .args(flags)
            .arg(&agent)
            .output()
            .unwrap();
        assert_eq!(
            converted.status.code(),
            Some(0),
            "{}",
            text(&converted.stderr)
        );
        text(&converted.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let calls = convert(&["--prompt"]);
    assert_eq!(
        calls[0]["prompt"],
        "<|im_start|>system\npolicy<|im_end|>\n<|im_start|>user\nbook a flight<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(
        calls[0]["output"],
        "<tool_call>\n{\"name\": \"find\", \"arguments\": {\"to\": \"SEA\"}}\n</tool_call>"
    );
    let prompt = calls[1]["prompt"].as_str().unwrap();
    assert!(
        prompt.starts_with(calls[0]["prompt"].as_str().unwrap())
            && prompt.contains("<|im_start|>tool name=find\nHAT1 to SEA<|im_end|>\n"),
        "{prompt}"
    );
    assert_eq!(calls[1]["output"], "HAT1 to SEA is free.");
    // As messages: the same calls, which render to the same prompts.
    let chats = convert(&[]);
    assert_eq!(chats.len(), calls.len());
    for (chat, call) in chats.iter().zip(&calls) {
        assert_eq!(
            (&chat["id"], &chat["output"]),
            (&call["id"], &call["output"])
        );
        assert!(chat.get("prompt").is_none(), "{chat}");
        let line = chat.to_string();
        let read = specdec_ingest::trace::TextRequest::parse(line.as_bytes(), 1).unwrap();
        assert_eq!(read.prompt.render(), call["prompt"].as_str().unwrap());
    }
    assert_eq!(
        chats[1]["messages"][3],
        serde_json::json!({"role": "tool name=find", "content": "HAT1 to SEA"})
    );

    let times = std::fs::read_to_string(out_dir.join("build-times.tsv")).unwrap();
    assert!(times.contains("tuning\tshort\ttiny\t"), "{times}");
    let stats = text(&out.stdout);
    assert!(stats.contains("tuning\tshort\t1\t4\t"), "{stats}");

    // Rebuilding one regime (agent needs no mirror) replaces its traces and
    // times and keeps the others'.
    let out = build(
        None,
        &out_dir,
        &["--regimes", "agent", "--agent", agent_arg],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(requests(&short_path).len(), 4);
    let times = std::fs::read_to_string(out_dir.join("build-times.tsv")).unwrap();
    for regime in ["short", "long", "agent"] {
        assert_eq!(
            times.matches(&format!("\t{regime}\t")).count(),
            if regime == "agent" { 2 } else { 1 },
            "{times}"
        );
    }

    // A range whose FROM is newer than its TO: refused before anything is
    // built, naming it.
    let reversed = dir.path().join("reversed.tsv");
    std::fs::write(
        &reversed,
        format!("name\tlanguage\trepository\tcommit\tfrom\tto\ntiny\tText\towner/tiny\t{pinned}\tv10\tv1\n"),
    )
    .unwrap();
    let out = corpus(&[
        "build",
        "--manifest",
        reversed.to_str().unwrap(),
        "--mirrors",
        mirrors.to_str().unwrap(),
        "--out",
        dir.path().join("out3").to_str().unwrap(),
        "--bin",
        bin.to_str().unwrap(),
        "--regimes",
        "long",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr)
            .contains("long range v10..v1 of owner/tiny: no chain of releases (v10 must be a tag that v1 contains, dated before it)"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.path().join("out3/tuning").exists());

    // A mirror missing: refused before anything is built, naming it.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = build(Some(&empty), &dir.path().join("out2"), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("no mirror of owner/tiny"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.path().join("out2/tuning").exists());
}
