//! `specdec-metrics ngram`: requests the tests write (and a repository they
//! build with `git init`) into traces, read back with the trace reader; and
//! every kind of bad input, each exit status 2 with a message naming the
//! line and the field.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::{Value, json};
use specdec_ingest::trace::{TraceMeta, TraceReader, TraceRequest};
use specdec_metrics_cli::ngram::suffix::{SuffixConfig, Tree};
use specdec_metrics_cli::ngram::tokenize::EOS;
use specdec_metrics_cli::ngram::{Config, Rule, generate};
use tempfile::TempDir;

fn bin() -> Command {
    Command::cargo_bin("specdec-metrics").unwrap()
}

struct Run {
    status: i32,
    stdout: Vec<u8>,
    stderr: String,
}

/// `ngram ARGS` started with its three streams piped.
fn spawn(args: &[&str]) -> std::process::Child {
    bin()
        .arg("ngram")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn run(args: &[&str], stdin: &[u8]) -> Run {
    let mut child = spawn(args);
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    Run {
        status: out.status.code().unwrap_or(-1),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn read_trace(bytes: &[u8]) -> (Option<TraceMeta>, Vec<TraceRequest>) {
    let mut reader = TraceReader::new(bytes);
    let meta = reader.meta().unwrap().cloned();
    let requests = reader.collect::<Result<Vec<_>, _>>().unwrap();
    (meta, requests)
}

fn o200k(text: &str) -> Vec<u32> {
    tiktoken_rs::o200k_base_singleton().encode_ordinary(text)
}

const REPEATING: &str =
    "fn add(a: u32, b: u32) -> u32 { a + b }\nfn sub(a: u32, b: u32) -> u32 { a - b }\n";

#[test]
fn requests_become_trace_lines_in_input_order() {
    let mut input = String::new();
    let mut expected = Vec::new();
    for i in 0..40 {
        let prompt = format!("request {i}: {REPEATING}");
        let output = format!("{REPEATING}fn mul{i}(a: u32, b: u32) -> u32 {{ a * b }}\n");
        let line = if i % 3 == 0 {
            json!({"prompt": prompt, "output": output})
        } else {
            json!({"id": format!("r{i}"), "prompt": prompt, "output": output})
        };
        input.push_str(&line.to_string());
        input.push('\n');
        if i == 5 {
            input.push_str("\n   \n"); // blank lines are skipped, but counted
        }
        expected.push((prompt, output));
    }
    let out = run(
        &[
            "--rule",
            "vllm",
            "--min-n",
            "2",
            "--max-n",
            "4",
            "--threads",
            "3",
        ],
        input.as_bytes(),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stderr, "", "quiet when nothing is to say");
    let (meta, requests) = read_trace(&out.stdout);
    assert_eq!(
        meta,
        Some(TraceMeta {
            tokenizer: "o200k_base".into(),
            rule: "vllm".into(),
            min_n: 2,
            max_n: 4,
            cap: 64,
            eos: true,
            greedy: true,
            num_speculative_tokens: None,
            suffix: None,
        })
    );
    assert_eq!(requests.len(), 40);
    let config = Config {
        rule: Rule::Vllm,
        min_n: 2,
        max_n: 4,
        cap: 64,
    };
    for (i, (r, (prompt, output))) in requests.iter().zip(&expected).enumerate() {
        // Ids as given; the line number when absent (two blank lines after
        // request 5 shift the later ones).
        let line = i as u64 + 1 + if i > 5 { 2 } else { 0 };
        let id = if i % 3 == 0 {
            Value::from(line)
        } else {
            Value::from(format!("r{i}"))
        };
        assert_eq!(r.id, id);
        let mut context = o200k(prompt);
        assert_eq!(r.prompt_tokens, context.len() as u64);
        let output_tokens = o200k(output);
        assert_eq!(
            r.output_tokens,
            output_tokens.len() as u64 + 1,
            "the EOS counts"
        );
        context.extend(output_tokens);
        context.push(EOS);
        let want = generate(&config, &context, r.output_tokens as usize);
        assert_eq!(r.proposal, want.proposal);
        assert_eq!(r.matched, want.matched);
        assert_eq!(r.ngram.as_ref(), Some(&want.ngram));
        // The output repeats the prompt: most positions are matched.
        let matched = r.matched.iter().filter(|&&m| m > 0).count();
        assert!(
            matched * 2 > r.matched.len(),
            "{matched} of {}",
            r.matched.len()
        );
    }
}

#[test]
fn eos_no_cap_rule_and_sampled_are_honoured() {
    let input = json!({"id": 7, "prompt": REPEATING, "output": REPEATING}).to_string();
    let out = run(
        &[
            "--eos",
            "no",
            "--cap",
            "3",
            "--rule",
            "hf",
            "--sampled",
            "--tokenizer",
            "cl100k_base",
        ],
        input.as_bytes(),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("not an exact counterfactual"),
        "{}",
        out.stderr
    );
    let (meta, requests) = read_trace(&out.stdout);
    let meta = meta.unwrap();
    assert_eq!((meta.rule.as_str(), meta.min_n, meta.max_n), ("hf", 1, 2));
    assert_eq!((meta.cap, meta.eos, meta.greedy), (3, false, false));
    assert_eq!(meta.tokenizer, "cl100k_base");
    let bpe = tiktoken_rs::cl100k_base_singleton();
    let r = &requests[0];
    assert_eq!(r.id, Value::from(7));
    assert_eq!(r.output_tokens, bpe.encode_ordinary(REPEATING).len() as u64);
    assert!(r.proposal.iter().all(|&l| l <= 3));
    assert!(r.proposal.contains(&3), "the cap is reached on a repeat");
}

#[test]
fn a_hugging_face_tokenizer_file_is_used() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("tokenizer.json");
    let tokenizer = json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1, "c": 2, "[UNK]": 3}, "unk_token": "[UNK]"}
    });
    std::fs::write(&path, tokenizer.to_string()).unwrap();
    let input = json!({"prompt": "a b c a b", "output": "c a b c"}).to_string();
    let out = run(
        &["--tokenizer", path.to_str().unwrap(), "--rule", "trtllm"],
        input.as_bytes(),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let (_, requests) = read_trace(&out.stdout);
    let r = &requests[0];
    assert_eq!((r.prompt_tokens, r.output_tokens), (5, 5));
    // Context "a b c a b c" at position 1: the suffix "a b c" (n = 3)
    // first occurred at 0, followed by "a b c" up to the end of the
    // context, which the rest of the output ("a b c", then EOS) confirms.
    assert_eq!(r.proposal[0], 3);
    assert_eq!(r.matched[0], 3);
    assert_eq!(r.ngram.as_ref().unwrap()[0], 3);
    // Position 2 (context "a b c a b c a"): the suffix "b c a" first
    // occurred at 1, followed by "b c a"; the output goes on "b c", then
    // ends.
    assert_eq!(
        (r.proposal[1], r.matched[1], r.ngram.as_ref().unwrap()[1]),
        (3, 2, 3)
    );
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

fn lines(n: usize, tag: &str) -> String {
    (0..n)
        .map(|i| format!("line {i} of the file {tag}\n"))
        .collect()
}

#[test]
fn git_history_becomes_code_edit_requests() {
    let dir = TempDir::new().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q"]);
    std::fs::write(repo.join("a.txt"), lines(20, "a")).unwrap();
    std::fs::write(repo.join("big.txt"), lines(20, "b")).unwrap();
    std::fs::write(repo.join("bin.dat"), b"\x00\x01\x02").unwrap();
    std::fs::write(repo.join("latin1.txt"), b"caf\xe9\n").unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-qm", "first"]);
    let mut a = lines(20, "a");
    a.push_str("one more line\n");
    std::fs::write(repo.join("a.txt"), &a).unwrap();
    std::fs::write(repo.join("big.txt"), lines(60, "B")).unwrap(); // 80 changed lines
    std::fs::write(repo.join("bin.dat"), b"\x00\x01\x03").unwrap();
    std::fs::write(repo.join("latin1.txt"), b"caf\xe9s\n").unwrap();
    std::fs::write(repo.join("new.txt"), "added, not modified\n").unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-qm", "second: grow a"]);
    std::fs::write(repo.join("a.txt"), lines(20, "a")).unwrap();
    git(repo, &["commit", "-qam", "third: shrink a"]);

    let out = run(
        &[
            "--git",
            repo.to_str().unwrap(),
            "--rule",
            "vllm",
            "--min-n",
            "2",
            "--max-n",
            "5",
        ],
        b"",
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let (meta, requests) = read_trace(&out.stdout);
    assert_eq!(meta.unwrap().rule, "vllm");
    let ids: Vec<String> = requests
        .iter()
        .map(|r| r.id.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.iter().all(|id| id.ends_with(":a.txt")), "{ids:?}");
    assert_ne!(ids[0], ids[1], "oldest first, one per commit");
    // The second request: prompt "third: shrink a\n\n" + the 21-line file,
    // output the 20-line file, which the drafter copies almost whole.
    let prompt = format!("third: shrink a\n\n{a}");
    assert_eq!(requests[1].prompt_tokens, o200k(&prompt).len() as u64);
    assert_eq!(
        requests[1].output_tokens,
        o200k(&lines(20, "a")).len() as u64 + 1
    );
    let r = &requests[1];
    assert!(r.matched.iter().map(|&m| u64::from(m)).sum::<u64>() > r.output_tokens);
    assert!(
        out.stderr.contains("2 requests")
            && out.stderr.contains("skipped 2 files not UTF-8 text")
            && out.stderr.contains("1 with more changed lines"),
        "{}",
        out.stderr
    );

    // --max-bytes below the before-file's size skips everything.
    let out = run(
        &["--git", repo.to_str().unwrap(), "--max-bytes", "100"],
        b"",
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(read_trace(&out.stdout).1.len(), 0);
    assert!(
        out.stderr.contains("2 larger than --max-bytes"),
        "{}",
        out.stderr
    );
}

/// A repository with tags `v1` and `v2` three commits apart: `a.txt`
/// edited twice, `b.txt` rewritten (80 changed lines), a binary file, a
/// Latin-1 file and a symbolic link changed, a file added and one deleted.
/// Returns the files `a.txt` and `b.txt` at `v1` and at `v2`.
fn two_tags(repo: &Path) -> [(String, String); 2] {
    git(repo, &["init", "-q"]);
    let a1 = lines(20, "a");
    let b1 = lines(20, "b");
    std::fs::write(repo.join("a.txt"), &a1).unwrap();
    std::fs::write(repo.join("b.txt"), &b1).unwrap();
    std::fs::write(repo.join("bin.dat"), b"\x00\x01\x02").unwrap();
    std::fs::write(repo.join("latin1.txt"), b"caf\xe9\n").unwrap();
    std::fs::write(repo.join("gone.txt"), "deleted, not modified\n").unwrap();
    std::os::unix::fs::symlink("a.txt", repo.join("link")).unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-qm", "first"]);
    git(repo, &["tag", "v1"]);
    std::fs::write(repo.join("a.txt"), format!("{a1}one more line\n")).unwrap();
    git(repo, &["commit", "-qam", "second"]);
    let a2 = format!("{a1}one more line\nand another\n");
    let b2 = lines(60, "B");
    std::fs::write(repo.join("a.txt"), &a2).unwrap();
    std::fs::write(repo.join("b.txt"), &b2).unwrap();
    std::fs::write(repo.join("bin.dat"), b"\x00\x01\x03").unwrap();
    std::fs::write(repo.join("latin1.txt"), b"caf\xe9s\n").unwrap();
    std::fs::write(repo.join("new.txt"), "added, not modified\n").unwrap();
    std::fs::remove_file(repo.join("gone.txt")).unwrap();
    std::fs::remove_file(repo.join("link")).unwrap();
    std::os::unix::fs::symlink("b.txt", repo.join("link")).unwrap();
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-qm", "third"]);
    git(repo, &["tag", "v2"]);
    [(a1, a2), (b1, b2)]
}

#[test]
fn a_git_range_makes_one_request_per_file_modified_between_two_tags() {
    let dir = TempDir::new().unwrap();
    let repo = dir.path();
    let [(a1, a2), (b1, b2)] = two_tags(repo);
    let repo_arg = repo.to_str().unwrap();
    let out = run(&["--git", repo_arg, "--git-range", "v1..v2"], b"");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let (_, requests) = read_trace(&out.stdout);
    let ids: Vec<&str> = requests.iter().map(|r| r.id.as_str().unwrap()).collect();
    // One per file, not per commit (a.txt changed in two), with the range's
    // defaults: b.txt's 80 changed lines are kept.
    assert_eq!(ids, ["v1..v2:a.txt", "v1..v2:b.txt"]);
    for (r, (path, before, after)) in requests
        .iter()
        .zip([("a.txt", &a1, &a2), ("b.txt", &b1, &b2)])
    {
        let prompt = format!("v1..v2: {path}\n\n{before}");
        assert_eq!(r.prompt_tokens, o200k(&prompt).len() as u64, "{path}");
        assert_eq!(r.output_tokens, o200k(after).len() as u64 + 1, "{path}");
    }
    assert_says(
        &out.stderr,
        &[
            "ngram --git-range v1..v2: 2 requests",
            "from 5 files modified",
            "skipped 2 not UTF-8 text",
            "0 with more changed lines",
            "1 symbolic links",
        ],
    );

    // The limits apply: b.txt has more than 30 changed lines, and both
    // files at v1 are larger than 100 bytes.
    let out = run(
        &[
            "--git",
            repo_arg,
            "--git-range",
            "v1..v2",
            "--max-changed-lines",
            "30",
        ],
        b"",
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let ids: Vec<String> = read_trace(&out.stdout)
        .1
        .iter()
        .map(|r| r.id.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["v1..v2:a.txt"]);
    assert!(
        out.stderr.contains("1 with more changed lines"),
        "{}",
        out.stderr
    );
    let out = run(
        &[
            "--git",
            repo_arg,
            "--git-range",
            "v1..v2",
            "--max-bytes",
            "100",
        ],
        b"",
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(read_trace(&out.stdout).1.len(), 0);
    assert!(
        out.stderr.contains("2 larger than --max-bytes"),
        "{}",
        out.stderr
    );

    // Commits work as ends too, and an empty range gives no request.
    let out = run(&["--git", repo_arg, "--git-range", "v2..HEAD"], b"");
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(read_trace(&out.stdout).1.len(), 0);
}

#[test]
fn git_ranges_given_twice_are_read_in_order_into_one_trace() {
    let dir = TempDir::new().unwrap();
    let repo = dir.path();
    two_tags(repo);
    // `mid` is the second commit: a.txt alone changes from v1 to it.
    git(repo, &["tag", "mid", "v2~1"]);
    let repo_arg = repo.to_str().unwrap();
    let single = |range: &str| {
        let out = run(&["--git", repo_arg, "--git-range", range], b"");
        assert_eq!(out.status, 0, "{}", out.stderr);
        String::from_utf8(out.stdout).unwrap()
    };
    let out = run(
        &[
            "--git",
            repo_arg,
            "--git-range",
            "v1..mid",
            "--git-range",
            "mid..v2",
        ],
        b"",
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let (_, requests) = read_trace(&out.stdout);
    let ids: Vec<&str> = requests.iter().map(|r| r.id.as_str().unwrap()).collect();
    assert_eq!(ids, ["v1..mid:a.txt", "mid..v2:a.txt", "mid..v2:b.txt"]);
    // Line for line what each range gives alone, in the order given, under
    // one metadata line.
    let (first, second) = (single("v1..mid"), single("mid..v2"));
    let mut expected: Vec<&str> = first.lines().collect();
    expected.extend(second.lines().skip(1));
    let both = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(both.lines().collect::<Vec<_>>(), expected);
    // The summary counts every range: 1 + 5 files modified.
    assert_says(
        &out.stderr,
        &[
            "ngram --git-range v1..mid ... mid..v2 (2 ranges): 3 requests",
            "from 6 files modified",
            "skipped 2 not UTF-8 text",
            "1 symbolic links",
        ],
    );
    // A bad range anywhere is refused before anything is written.
    let out = run(
        &[
            "--git",
            repo_arg,
            "--git-range",
            "v1..mid",
            "--git-range",
            "mid..nope",
        ],
        b"",
    );
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--git-range mid..nope: \"nope\" does not name a commit"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{:?}", out.stdout);
}

#[test]
fn a_bad_git_range_is_refused_quoting_git() {
    let dir = TempDir::new().unwrap();
    let repo = dir.path();
    two_tags(repo);
    let repo_arg = repo.to_str().unwrap();
    assert_bad(
        &["--git", repo_arg, "--git-range", "v1..nope"],
        b"",
        &[
            "--git-range v1..nope: \"nope\" does not name a commit",
            "git rev-parse: fatal: bad revision 'nope^{commit}'",
        ],
    );
    // A tag of a tree is not a commit: git says so.
    git(repo, &["tag", "tree", "v1^{tree}"]);
    assert_bad(
        &["--git", repo_arg, "--git-range", "tree..v2"],
        b"",
        &["\"tree\" does not name a commit", "expected commit type"],
    );
    for (range, needle) in [
        ("v1", "is not a range"),
        ("v1...v2", "three dots"),
        ("..v2", "both ends"),
        ("v1..", "both ends"),
    ] {
        assert_bad(&["--git", repo_arg, "--git-range", range], b"", &[needle]);
    }
    // The range names commits of a repository: --git is required.
    assert_bad(&["--git-range", "v1..v2"], b"", &["--git"]);
    assert_bad(
        &[
            "--git",
            dir.path().join("nope").to_str().unwrap(),
            "--git-range",
            "v1..v2",
        ],
        b"",
        &["no such directory"],
    );
    let plain = TempDir::new().unwrap();
    assert_bad(
        &[
            "--git",
            plain.path().to_str().unwrap(),
            "--git-range",
            "v1..v2",
        ],
        b"",
        &["not a git repository"],
    );
}

/// Every one of `needles` is in `stderr`.
fn assert_says(stderr: &str, needles: &[&str]) {
    for needle in needles {
        assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    }
}

fn assert_bad(args: &[&str], stdin: &[u8], needles: &[&str]) {
    let out = run(args, stdin);
    assert_eq!(out.status, 2, "{args:?}: {}", out.stderr);
    assert_says(&out.stderr, needles);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}

const GOOD: &str = "{\"prompt\":\"a\",\"output\":\"b\"}\n";

#[test]
fn bad_requests_stop_the_run_naming_line_and_field() {
    let cases: &[(&[u8], &[&str])] = &[
        (
            b"{\"prompt\":\"a\"}\n",
            &["line 1", "field \"output\"", "missing"],
        ),
        (
            b"{\"output\":\"a\"}\n",
            &["line 1", "field \"prompt\"", "missing"],
        ),
        (
            b"{\"prompt\":\"a\",\"output\":3}\n",
            &["line 1", "field \"output\"", "must be a string"],
        ),
        (
            b"{\"prompt\":\"a\",\"output\":\"b\",\"id\":[1]}\n",
            &["line 1", "field \"id\""],
        ),
        (b"[1, 2]\n", &["line 1", "not a JSON object"]),
        (b"{\"prompt\":\"a\",\n", &["line 1", "not JSON"]),
        (
            b"{\"prompt\":\"\xff\",\"output\":\"b\"}\n",
            &["line 1", "not UTF-8"],
        ),
        // `replay` refuses a key given twice; so does `ngram`, rather than
        // keep the last output.
        (
            b"{\"prompt\":\"a\",\"output\":\"b\",\"output\":\"c\"}\n",
            &["line 1: duplicate key \"output\""],
        ),
        (
            b"{\"prompt\":\"a\",\"output\":\"b\",\"x\":{\"k\":1,\"k\":2}}\n",
            &["line 1: duplicate key \"k\""],
        ),
        (
            b"\xef\xbb\xbf{\"prompt\":\"a\",\"output\":\"b\"}\n",
            &["line 1: the line starts with a byte-order mark (bytes EF BB BF)"],
        ),
        // Quoted as written, not as the float serde_json reads.
        (
            b"{\"prompt\":\"a\",\"output\":\"b\",\"id\":123456789012345678901234567890}\n",
            &[
                "field \"id\": must be a string or an integer, not \"123456789012345678901234567890\"",
            ],
        ),
    ];
    for (bad, needles) in cases {
        let mut input = GOOD.repeat(3).into_bytes();
        input.extend_from_slice(bad);
        input.extend_from_slice(GOOD.as_bytes());
        let needles: Vec<String> = needles
            .iter()
            .map(|n| n.replace("line 1", "line 4"))
            .collect();
        let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        let out = run(&[], &input);
        assert_eq!(out.status, 2, "{}", out.stderr);
        assert_says(&out.stderr, &needles);
        // The three requests before it were written, and nothing after.
        assert_eq!(out.stdout.iter().filter(|&&b| b == b'\n').count(), 4);
    }
}

#[test]
fn an_output_of_no_tokens_needs_eos() {
    let input = b"{\"prompt\":\"a\",\"output\":\"\"}\n";
    assert_bad(
        &["--eos", "no"],
        input,
        &["line 1", "field \"output\"", "tokenizes to nothing"],
    );
    let out = run(&[], input);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(read_trace(&out.stdout).1[0].output_tokens, 1);
}

#[test]
fn a_line_longer_than_the_limit_is_not_read_whole() {
    assert_bad(
        &["--max-line-bytes", "1K"],
        format!(
            "{GOOD}{{\"prompt\":\"{}\",\"output\":\"b\"}}\n",
            "x".repeat(2000)
        )
        .as_bytes(),
        &["line 2", "longer than 1024 bytes"],
    );
    // 80 MiB without a newline against the default 64 MiB: stops at the
    // limit (the writer's later writes fail, which is fine).
    let mut child = bin()
        .args(["ngram"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..80 {
            if input.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1: longer than 67108864 bytes"));
}

#[test]
fn bad_flags_and_files_are_errors() {
    let dir = TempDir::new().unwrap();
    let missing = dir.path().join("missing.jsonl");
    assert_bad(
        &[missing.to_str().unwrap()],
        b"",
        &["cannot open", "missing.jsonl"],
    );
    let not_tokenizer = dir.path().join("tok.json");
    std::fs::write(&not_tokenizer, "{\"hello\": 1}").unwrap();
    // The tokenizer's and the repository's errors name them by their flag.
    let tok = not_tokenizer.to_str().unwrap();
    assert_bad(
        &["--tokenizer", tok],
        GOOD.as_bytes(),
        &[&format!(
            "error: --tokenizer {tok}: not a Hugging Face tokenizer.json"
        )],
    );
    let missing_name = missing.to_str().unwrap();
    assert_bad(
        &["--tokenizer", missing_name],
        GOOD.as_bytes(),
        &[&format!(
            "error: --tokenizer {missing_name}: not o200k_base or cl100k_base, and cannot open it"
        )],
    );
    assert_bad(&["--min-n", "0"], GOOD.as_bytes(), &["--min-n"]);
    assert_bad(
        &["--min-n", "4", "--max-n", "3"],
        GOOD.as_bytes(),
        &["--min-n 4 is larger than --max-n 3"],
    );
    assert_bad(&["--cap", "0"], GOOD.as_bytes(), &["--cap"]);
    assert_bad(&["--cap", "256"], GOOD.as_bytes(), &["--cap"]);
    assert_bad(
        &["--rule", "llamacpp-simple", "--min-n", "2", "--max-n", "3"],
        GOOD.as_bytes(),
        &["must be equal"],
    );
    let repo = dir.path().to_str().unwrap();
    assert_bad(
        &["--git", repo],
        b"",
        &[&format!("error: --git {repo}: not a git repository")],
    );
    assert_bad(
        &["--git", missing_name],
        b"",
        &[&format!("error: --git {missing_name}: no such directory\n")],
    );
}

#[test]
fn a_directory_is_refused_before_anything_is_written() {
    let dir = TempDir::new().unwrap();
    let out = run(&[dir.path().to_str().unwrap()], b"");
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stderr.contains("is a directory"), "{}", out.stderr);
    // Not even the metadata line: every input is checked first.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
}

#[test]
fn an_input_refused_at_its_first_line_leaves_nothing_written() {
    let out = run(&[], b"\xff\xfe not text\n");
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stderr.contains("not UTF-8"), "{}", out.stderr);
    // Not a metadata line alone, which would read as an empty trace.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    // An empty input is a trace of no requests: the metadata line alone.
    let out = run(&[], b"");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.starts_with("{\"specdec_trace\":"), "{stdout}");
    // With requests, the metadata line still comes first.
    let out = run(&[], GOOD.as_bytes());
    assert_eq!(out.status, 0, "{}", out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("{\"specdec_trace\":"), "{stdout}");
    assert!(stdout.lines().count() > 1, "{stdout}");
}

#[test]
fn a_request_reaches_the_reader_while_the_input_stays_open() {
    use std::io::{BufRead, BufReader};
    let mut child = spawn(&[]);
    let mut input = child.stdin.take().unwrap();
    input.write_all(GOOD.as_bytes()).unwrap();
    input.flush().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        for _ in 0..2 {
            let _ = tx.send(lines.next());
        }
    });
    // The input is still open: the lines arrive only if what was written
    // is flushed while the command waits on it (after a second of quiet).
    let wait = std::time::Duration::from_secs(120);
    let header = rx
        .recv_timeout(wait)
        .expect("no metadata line while the input is open");
    let request = rx
        .recv_timeout(wait)
        .expect("no request while the input is open");
    let header = header.unwrap().unwrap();
    assert!(header.starts_with("{\"specdec_trace\":"), "{header}");
    let request: Value = serde_json::from_str(&request.unwrap().unwrap()).unwrap();
    assert_eq!(request["output_tokens"], 2, "{request}");
    drop(input);
    assert!(child.wait().unwrap().success());
}

/// Runs `sh -c SCRIPT` with `$BIN` the command line, for redirections a
/// `Command` cannot make (`>&-`, `>>`).
fn sh(script: &str) -> std::process::Output {
    Command::new("sh")
        .args(["-c", script])
        .env("BIN", assert_cmd::cargo::cargo_bin!("specdec-metrics"))
        .output()
        .unwrap()
}

#[test]
fn standard_output_closed_is_an_error() {
    let dir = TempDir::new().unwrap();
    let requests = dir.path().join("req.jsonl");
    std::fs::write(&requests, GOOD).unwrap();
    let req = requests.to_str().unwrap();
    let out = sh(&format!("exec \"$BIN\" ngram '{req}' >&-"));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: standard output is closed; the trace was not written\n"
    );
    // With --output, standard output is not used.
    let trace = dir.path().join("trace.jsonl");
    let out = sh(&format!(
        "exec \"$BIN\" ngram '{req}' --output '{}' >&-",
        trace.display()
    ));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(read_trace(&std::fs::read(&trace).unwrap()).1.len(), 1);
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let dir = TempDir::new().unwrap();
    let requests = dir.path().join("req.jsonl");
    let text = GOOD.repeat(3);
    std::fs::write(&requests, &text).unwrap();
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&requests, &link).unwrap();
    let req = requests.to_str().unwrap();
    // --output onto the requests, by their name or through a link.
    for output in [req, link.to_str().unwrap()] {
        assert_bad(
            &[req, "--output", output],
            b"",
            &["--output", "is the input", "nothing was written"],
        );
        assert_eq!(std::fs::read_to_string(&requests).unwrap(), text);
    }
    // --output onto the file on standard input (read by default, or as -).
    for input in [None, Some("-")] {
        let out = bin()
            .args(["ngram", "--output", req])
            .args(input)
            .stdin(std::fs::File::open(&requests).unwrap())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("is the file on standard input"),
            "{out:?}"
        );
        assert_eq!(std::fs::read_to_string(&requests).unwrap(), text);
    }
    // --output onto the tokenizer file.
    let tokenizer = dir.path().join("tokenizer.json");
    let tokenizer_text = json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1, "[UNK]": 2}, "unk_token": "[UNK]"}
    })
    .to_string();
    std::fs::write(&tokenizer, &tokenizer_text).unwrap();
    let tok = tokenizer.to_str().unwrap();
    assert_bad(
        &[req, "--tokenizer", tok, "--output", tok],
        b"",
        &["is the --tokenizer file", "nothing was written"],
    );
    assert_eq!(std::fs::read_to_string(&tokenizer).unwrap(), tokenizer_text);
    // Standard output appended to the requests.
    let out = sh(&format!("exec \"$BIN\" ngram '{req}' >> '{req}'"));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("standard output is the input"),
        "{out:?}"
    );
    assert_eq!(std::fs::read_to_string(&requests).unwrap(), text);
    // Another file is written as before.
    let trace = dir.path().join("trace.jsonl");
    let out = run(&[req, "--output", trace.to_str().unwrap()], b"");
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(
        read_trace(&std::fs::read(&trace).unwrap()).1.len(),
        3,
        "three requests"
    );
}

/// A repository of two commits editing `a.txt`, and its git directory.
fn two_commits(dir: &Path) -> std::path::PathBuf {
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("a.txt"), lines(5, "a")).unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", "first"]);
    std::fs::write(dir.join("a.txt"), lines(6, "a")).unwrap();
    git(dir, &["commit", "-qam", "second"]);
    dir.join(".git")
}

fn git_out(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn a_broken_head_is_an_error_quoting_git_and_a_new_repository_has_no_commits() {
    // A new repository: no commits, no requests, said so (also with an
    // empty reflog of HEAD).
    let dir = TempDir::new().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    for reflog in [false, true] {
        if reflog {
            let logs = dir.path().join(".git/logs");
            std::fs::create_dir_all(&logs).unwrap();
            std::fs::write(logs.join("HEAD"), "").unwrap();
        }
        let out = run(&["--git", dir.path().to_str().unwrap()], b"");
        assert_eq!(out.status, 0, "{}", out.stderr);
        assert_eq!(read_trace(&out.stdout).1.len(), 0);
        assert!(
            out.stderr
                .contains("no commits yet (HEAD names refs/heads/main, a branch without any)"),
            "{}",
            out.stderr
        );
    }

    // HEAD's commit missing from the object database.
    let dir = TempDir::new().unwrap();
    let git_dir = two_commits(dir.path());
    let head = git_out(dir.path(), &["rev-parse", "HEAD"]);
    std::fs::remove_file(git_dir.join("objects").join(&head[..2]).join(&head[2..])).unwrap();
    let out = run(&["--git", dir.path().to_str().unwrap()], b"");
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .ends_with(": git log failed (exit status: 128): fatal: bad object HEAD\n"),
        "git's words alone: {}",
        out.stderr
    );

    // The branch's ref holds no hash.
    let dir = TempDir::new().unwrap();
    let git_dir = two_commits(dir.path());
    std::fs::write(git_dir.join("refs/heads/main"), "not a hash\n").unwrap();
    assert_bad(
        &["--git", dir.path().to_str().unwrap()],
        b"",
        &["git log failed", "HEAD"],
    );

    // HEAD names a branch that does not exist, beside one with commits.
    let dir = TempDir::new().unwrap();
    let git_dir = two_commits(dir.path());
    std::fs::write(git_dir.join("HEAD"), "ref: refs/heads/gone\n").unwrap();
    assert_bad(
        &["--git", dir.path().to_str().unwrap()],
        b"",
        &["git log failed", "refs/heads/gone", "does not exist"],
    );

    // The same in a bare clone: refs, and no reflog.
    let dir = TempDir::new().unwrap();
    two_commits(dir.path());
    let bare = dir.path().join("bare.git");
    let status = Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(dir.path())
        .arg(&bare)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(bare.join("HEAD"), "ref: refs/heads/gone\n").unwrap();
    assert!(!bare.join("logs/HEAD").exists());
    assert_bad(
        &["--git", bare.to_str().unwrap()],
        b"",
        &["git log failed", "refs/heads/gone", "does not exist"],
    );

    // The branch's ref deleted by hand: HEAD's reflog still holds its
    // commits.
    let dir = TempDir::new().unwrap();
    let git_dir = two_commits(dir.path());
    std::fs::remove_file(git_dir.join("refs/heads/main")).unwrap();
    assert_bad(
        &["--git", dir.path().to_str().unwrap()],
        b"",
        &["git log failed", "refs/heads/main", "does not exist"],
    );

    // A commit missing in the middle of the history.
    let dir = TempDir::new().unwrap();
    let git_dir = two_commits(dir.path());
    let first = git_out(dir.path(), &["rev-parse", "HEAD~1"]);
    std::fs::remove_file(git_dir.join("objects").join(&first[..2]).join(&first[2..])).unwrap();
    assert_bad(
        &["--git", dir.path().to_str().unwrap()],
        b"",
        &["git log failed", &first[..7]],
    );
}

#[test]
fn submodules_and_symbolic_links_are_skipped_and_counted() {
    let dir = TempDir::new().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q"]);
    std::fs::write(repo.join("a.txt"), lines(5, "a")).unwrap();
    std::fs::write(repo.join("b.txt"), lines(5, "b")).unwrap();
    std::os::unix::fs::symlink("a.txt", repo.join("link")).unwrap();
    git(repo, &["add", "."]);
    // A submodule's commit, which the repository does not hold.
    let gitlink = |hash: &str| format!("160000,{hash},sub");
    git(
        repo,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &gitlink(&"1".repeat(40)),
        ],
    );
    git(repo, &["commit", "-qm", "first"]);
    std::fs::write(repo.join("a.txt"), lines(6, "a")).unwrap();
    std::fs::remove_file(repo.join("link")).unwrap();
    std::os::unix::fs::symlink("b.txt", repo.join("link")).unwrap();
    git(repo, &["add", "a.txt", "link"]);
    git(
        repo,
        &["update-index", "--cacheinfo", &gitlink(&"2".repeat(40))],
    );
    git(repo, &["commit", "-qm", "second"]);

    let out = run(&["--git", repo.to_str().unwrap()], b"");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let ids: Vec<String> = read_trace(&out.stdout)
        .1
        .iter()
        .map(|r| r.id.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert!(ids[0].ends_with(":a.txt"), "{ids:?}");
    assert_says(
        &out.stderr,
        &[
            "1 requests",
            "0 whose parent is not in the repository",
            "1 submodules",
            "1 symbolic links",
        ],
    );
}

fn repo_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The README's `ngram` and `whatif` commands, as printed: the lines of
/// its `sh` block that start with `specdec-metrics ngram` or `whatif`,
/// each with its `# comment` removed and its `> FILE` a redirection.
fn readme_commands() -> Vec<(Vec<String>, Option<String>)> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let commands: Vec<_> = readme
        .lines()
        .filter(|l| {
            l.starts_with("specdec-metrics ngram ") || l.starts_with("specdec-metrics whatif ")
        })
        .map(|l| {
            let command = l.split(" # ").next().unwrap();
            let (command, redirect) = match command.split_once(" > ") {
                Some((c, file)) => (c, Some(file.trim().to_owned())),
                None => (command, None),
            };
            let words: Vec<String> = command
                .split_whitespace()
                .skip(1)
                .map(str::to_owned)
                .collect();
            (words, redirect)
        })
        .collect();
    assert!(
        commands.len() >= 3
            && commands
                .iter()
                .any(|(w, _)| w.contains(&"--git".to_owned()))
            && commands.iter().any(|(w, _)| w[0] == "whatif"),
        "the README's ngram and whatif commands: {commands:?}"
    );
    commands
}

#[test]
fn the_readme_commands_run_as_printed() {
    // A repository made here, holding the shipped requests and a few code
    // edits, so that `--git .` reads a known, full history (a CI clone may
    // be shallow).
    let dir = TempDir::new().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q"]);
    std::fs::create_dir(repo.join("examples")).unwrap();
    std::fs::copy(
        repo_root().join("examples/requests.jsonl"),
        repo.join("examples/requests.jsonl"),
    )
    .unwrap();
    std::fs::write(repo.join("lib.rs"), lines(20, "a")).unwrap();
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", "first"]);
    for edit in ["b", "c"] {
        let text = lines(20, "a").replace("line 7 of the file a", &format!("line 7, {edit}"));
        std::fs::write(repo.join("lib.rs"), text).unwrap();
        git(repo, &["commit", "-q", "-a", "-m", edit]);
    }

    for (words, redirect) in readme_commands() {
        let out = bin().args(&words).current_dir(repo).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{words:?}: {stderr}");
        if words[0] == "ngram" {
            let (meta, requests) = read_trace(&out.stdout);
            assert!(meta.is_some(), "{words:?}");
            let expected = if words.contains(&"--git".to_owned()) {
                2
            } else {
                8
            };
            assert_eq!(requests.len(), expected, "{words:?}: {stderr}");
        } else {
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.contains("best"), "{words:?}: {stdout}");
        }
        if let Some(file) = redirect {
            std::fs::write(repo.join(file), &out.stdout).unwrap();
        }
    }
    let plot = std::fs::read_to_string(repo.join("whatif.svg")).unwrap();
    assert!(plot.starts_with("<svg") || plot.contains("<svg"), "{plot}");

    // The same history from a bare clone: the same requests.
    let bare = dir.path().join("bare.git");
    let status = Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(repo)
        .arg(&bare)
        .status()
        .unwrap();
    assert!(status.success());
    let from = |path: &Path| {
        let out = run(&["--git", path.to_str().unwrap()], b"");
        assert_eq!(out.status, 0, "{}", out.stderr);
        out.stdout
    };
    assert_eq!(from(&bare), from(repo));
}

/// The suffix rule run directly at cap `k` with the trees' own
/// `speculate`: per request, the draft length and agreement at every
/// position (the per-request tree holds the prompt, the global tree the
/// outputs, every response kept).
fn suffix_direct(
    config: &SuffixConfig,
    requests: &[(Vec<u32>, Vec<u32>)],
    k: usize,
) -> Vec<Vec<(usize, usize)>> {
    let mut global = Tree::new(config.depth);
    let mut out = Vec::new();
    for (prompt, output) in requests {
        let mut local = Tree::new(config.depth);
        let (lseq, gseq) = (local.add_sequence(), global.add_sequence());
        for &t in prompt {
            local.append(lseq, t);
        }
        let mut positions = Vec::new();
        for t in 1..output.len() {
            local.append(lseq, output[t - 1]);
            global.append(gseq, output[t - 1]);
            let context: Vec<u32> = prompt.iter().chain(&output[..t]).copied().collect();
            let (a, b) = (
                local.speculate(&context, k, config),
                global.speculate(&context, k, config),
            );
            let draft = if a.score >= b.score { a } else { b };
            let agree = draft
                .tokens
                .iter()
                .zip(&output[t..])
                .take_while(|(x, y)| x == y)
                .count();
            positions.push((draft.tokens.len(), agree));
        }
        global.append(gseq, *output.last().unwrap());
        out.push(positions);
    }
    out
}

#[test]
fn rule_suffix_writes_every_cap_exactly_in_input_order() {
    let texts: Vec<(String, String)> = (0..12)
        .map(|i| {
            let prompt = format!("Edit {i}:\n{}", REPEATING.repeat(1 + i % 3));
            let output = REPEATING.replace("add", &format!("add{}", i % 4)).repeat(2);
            (prompt, output)
        })
        .collect();
    let input: String = texts
        .iter()
        .map(|(p, o)| json!({"prompt": p, "output": o}).to_string() + "\n")
        .collect();
    let out = run(
        &[
            "--rule",
            "suffix",
            "--suffix-depth",
            "10",
            "--cap",
            "7",
            "--threads",
            "3",
        ],
        input.as_bytes(),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let (meta, traced) = read_trace(&out.stdout);
    let meta = meta.unwrap();
    assert_eq!(
        (meta.rule.as_str(), meta.min_n, meta.max_n, meta.cap),
        ("suffix", 1, 9, 7)
    );
    assert_eq!(meta.num_speculative_tokens, Some(7));
    let settings = meta.suffix.unwrap();
    assert_eq!(
        (settings.depth, settings.cache, settings.min_prob),
        (10, 10_000, 0.1)
    );
    let config = SuffixConfig {
        depth: 10,
        cap: 7,
        ..SuffixConfig::VLLM
    };
    let tokens: Vec<(Vec<u32>, Vec<u32>)> = texts
        .iter()
        .map(|(p, o)| {
            let mut output = o200k(o);
            output.push(EOS);
            (o200k(p), output)
        })
        .collect();
    for k in 1..=7 {
        let want = suffix_direct(&config, &tokens, k);
        for (r, w) in traced.iter().zip(&want) {
            let got: Vec<_> = (0..r.positions()).map(|j| r.outcome(j, k)).collect();
            assert_eq!(&got, w, "cap {k}");
        }
    }
    // The global tree copies the earlier outputs: most drafts hold.
    let (drafted, held) = traced
        .iter()
        .flat_map(|r| r.proposal.iter().zip(&r.matched))
        .fold((0usize, 0usize), |(d, h), (&l, &m)| {
            (d + usize::from(l), h + usize::from(m))
        });
    assert!(held * 2 > drafted, "{held} of {drafted}");
}

#[test]
fn rule_suffix_refuses_n_gram_flags_and_others_refuse_its_flags() {
    assert_bad(
        &["--rule", "suffix", "--min-n", "3"],
        GOOD.as_bytes(),
        &["--min-n does not apply to --rule suffix", "--suffix-depth"],
    );
    assert_bad(
        &["--rule", "suffix", "--max-n", "3"],
        GOOD.as_bytes(),
        &["--max-n does not apply to --rule suffix"],
    );
    assert_bad(
        &["--suffix-cache", "3"],
        GOOD.as_bytes(),
        &["--suffix-cache applies to --rule suffix only, not --rule vllm"],
    );
    assert_bad(
        &["--rule", "suffix", "--suffix-factor", "nan"],
        GOOD.as_bytes(),
        &["not a finite number"],
    );
    assert_bad(
        &["--rule", "suffix", "--suffix-depth", "1"],
        GOOD.as_bytes(),
        &["--suffix-depth"],
    );
}

#[test]
fn the_global_tree_stops_at_its_memory_ceiling_with_a_message() {
    let input = format!("{}{}", json!({"prompt": "p", "output": REPEATING}), "\n").repeat(3);
    let out = run(
        &["--rule", "suffix", "--suffix-max-memory", "4K"],
        input.as_bytes(),
    );
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("request \"1\": the global suffix tree holds 1 responses in ")
            && out
                .stderr
                .contains("KiB, above --suffix-max-memory (4.0 KiB)")
            && out.stderr.contains("above --suffix-max-memory")
            && out.stderr.contains("Lower --suffix-cache"),
        "{}",
        out.stderr
    );
    // A ceiling it fits under, and no global tree at all, both finish.
    for args in [
        &["--rule", "suffix", "--suffix-max-memory", "64M"][..],
        &[
            "--rule",
            "suffix",
            "--suffix-cache",
            "0",
            "--suffix-max-memory",
            "1K",
        ][..],
    ] {
        let out = run(args, input.as_bytes());
        assert_eq!(out.status, 0, "{args:?}: {}", out.stderr);
        assert_eq!(read_trace(&out.stdout).1.len(), 3);
    }
}

#[test]
fn in_flight_one_is_the_file_order_trace_and_more_is_refused_above_the_cache() {
    let input: String = (0..6)
        .map(|i| {
            json!({"prompt": format!("p{i}"), "output": REPEATING.replace("add", &format!("a{}", i % 2))})
                .to_string()
                + "\n"
        })
        .collect();
    let plain = run(
        &["--rule", "suffix", "--suffix-depth", "8"],
        input.as_bytes(),
    );
    let one = run(
        &[
            "--rule",
            "suffix",
            "--suffix-depth",
            "8",
            "--suffix-in-flight",
            "1",
        ],
        input.as_bytes(),
    );
    assert_eq!((plain.status, one.status), (0, 0), "{}", one.stderr);
    assert_eq!(plain.stdout, one.stdout);
    let four = run(
        &[
            "--rule",
            "suffix",
            "--suffix-depth",
            "8",
            "--suffix-in-flight",
            "4",
        ],
        input.as_bytes(),
    );
    assert_eq!(four.status, 0, "{}", four.stderr);
    let (_, a) = read_trace(&plain.stdout);
    let (_, b) = read_trace(&four.stdout);
    assert_eq!(a.len(), b.len());
    // The same requests, drafted from another global tree.
    assert!(
        a.iter()
            .zip(&b)
            .all(|(x, y)| x.id == y.id && x.output_tokens == y.output_tokens)
    );
    assert_ne!(a, b);
    assert_bad(
        &[
            "--rule",
            "suffix",
            "--suffix-cache",
            "2",
            "--suffix-in-flight",
            "3",
        ],
        GOOD.as_bytes(),
        &["--suffix-in-flight 3 is above --suffix-cache 2"],
    );
}

/// Agent-style calls built here: `conversations` chats under one system
/// prompt, each call the messages so far and the assistant's next turn
/// (a tool call), interleaved across chats as concurrent agents' calls
/// are. Returns each call as messages and as the rendered prompt.
fn agent_calls(conversations: usize, rounds: usize) -> Vec<(Value, Value)> {
    let system =
        json!({"role": "system", "content": format!("You edit code.\n{REPEATING}{REPEATING}")});
    let mut chats: Vec<Vec<Value>> = vec![vec![system]; conversations];
    let mut calls = Vec::new();
    for r in 0..rounds {
        for (c, chat) in chats.iter_mut().enumerate() {
            chat.push(
                json!({"role": "user", "content": format!("chat {c} round {r}: add fn f{r}")}),
            );
            let output = format!(
                "<tool_call>\n{{\"name\": \"edit\", \"arguments\": {{\"text\": \"fn f{r}(a: u32, b: u32) -> u32 {{ a + b }}\"}}}}\n</tool_call>"
            );
            let id = format!("c{c}/r{r}");
            let rendered: String = chat
                .iter()
                .map(|m| {
                    format!(
                        "<|im_start|>{}\n{}<|im_end|>\n",
                        m["role"].as_str().unwrap(),
                        m["content"].as_str().unwrap()
                    )
                })
                .chain(std::iter::once("<|im_start|>assistant\n".to_owned()))
                .collect();
            calls.push((
                json!({"id": id, "messages": chat.clone(), "output": output}),
                json!({"id": id, "prompt": rendered, "output": output}),
            ));
            chat.push(json!({"role": "assistant", "content": output}));
            chat.push(json!({"role": "tool name=edit", "content": format!("ok: {REPEATING}")}));
        }
    }
    calls
}

fn json_lines(values: impl Iterator<Item = Value>) -> String {
    values.map(|v| format!("{v}\n")).collect()
}

#[test]
fn messages_give_the_trace_of_the_rendered_prompt() {
    let calls = agent_calls(3, 6);
    // Where o200k_base tokenizes each rendered message as it tokenizes
    // the whole prompt (checked here), the traces must agree exactly.
    for (messages, prompt) in &calls {
        let per_message: Vec<u32> = messages["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                format!(
                    "<|im_start|>{}\n{}<|im_end|>\n",
                    m["role"].as_str().unwrap(),
                    m["content"].as_str().unwrap()
                )
            })
            .chain(std::iter::once("<|im_start|>assistant\n".to_owned()))
            .flat_map(|text| o200k(&text))
            .collect();
        assert_eq!(per_message, o200k(prompt["prompt"].as_str().unwrap()));
    }
    let as_messages = json_lines(calls.iter().map(|(m, _)| m.clone()));
    let as_prompts = json_lines(calls.iter().map(|(_, p)| p.clone()));
    for flags in [
        &["--rule", "vllm", "--min-n", "2"][..],
        &["--rule", "hf", "--threads", "1"],
        &["--rule", "trtllm", "--threads", "3", "--token-cache", "1"],
        &["--rule", "llamacpp-simple", "--min-n", "3", "--cap", "8"],
        &["--rule", "suffix"],
    ] {
        let whole = run(flags, as_prompts.as_bytes());
        let chat = run(flags, as_messages.as_bytes());
        assert_eq!((whole.status, chat.status), (0, 0), "{}", chat.stderr);
        let (meta, expected) = read_trace(&whole.stdout);
        let (chat_meta, got) = read_trace(&chat.stdout);
        assert_eq!(meta, chat_meta);
        assert_eq!(got.len(), calls.len());
        assert_eq!(got, expected, "{flags:?}");
        // Some proposals, so that the comparison says something.
        assert!(got.iter().any(|r| r.matched.iter().any(|&m| m > 0)));
        assert!(chat.stderr.contains("chat messages: "), "{}", chat.stderr);
    }
}

#[test]
fn a_bad_messages_line_stops_the_run_naming_line_and_key() {
    let calls = agent_calls(1, 2);
    let mut input = json_lines(calls.iter().map(|(m, _)| m.clone()));
    input.push_str("{\"messages\": [{\"role\": \"user\"}], \"output\": \"o\"}\n");
    let out = run(&[], input.as_bytes());
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("line 3: field \"messages\": message 1 of 1: key \"content\": missing"),
        "{}",
        out.stderr
    );
    // The requests before it are written.
    assert_eq!(read_trace(&out.stdout).1.len(), 2);
}
