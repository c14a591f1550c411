//! The command-line manual, `docs/cli.md`, stays true: every `console`
//! example in it is run, in order, from a scratch copy of the repository's
//! `examples/`, and what it prints (standard output and standard error
//! together, in order) must be exactly what the manual shows (commands that
//! generate their input, such as the `awk` line of the `advise` example,
//! run too, and the engine fixtures of `cli/tests/fixtures` are in
//! `fixtures/`); the example trace it shows is the file `examples/trace.jsonl`;
//! and every relative link in it leads to a file, and to a heading of that
//! file when it names one.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The manual, `docs/cli.md`.
fn manual() -> String {
    fs::read_to_string(repo_root().join("docs/cli.md")).unwrap()
}

/// The fenced blocks of `lang` in `text`, with their indentation (a block
/// in a list item is indented) removed.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim_start() != format!("```{lang}") {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let mut block = String::new();
        for line in lines.by_ref() {
            if line.trim() == "```" {
                break;
            }
            block.push_str(line.get(indent..).unwrap_or(line.trim_start()));
            block.push('\n');
        }
        out.push(block);
    }
    out
}

/// A console block as (command, expected output) pairs.
fn commands(block: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in block.lines() {
        match line.strip_prefix("$ ") {
            Some(cmd) => out.push((cmd.to_owned(), String::new())),
            None => {
                let (_, expected) = out.last_mut().expect("a block starts with a command");
                expected.push_str(line);
                expected.push('\n');
            }
        }
    }
    out
}

#[test]
fn console_examples_print_what_the_manual_shows() {
    let consoles = blocks(&manual(), "console");
    assert!(
        consoles.len() >= 13,
        "found {} console blocks",
        consoles.len()
    );
    // The advise example: its table and its recommendation, shown as run.
    assert!(
        consoles
            .iter()
            .any(|b| b.contains("\n$ specdec-metrics advise ")
                && b.contains("--format table")
                && b.contains("\nRecommendation: draft ")),
        "no console example of advise --format table"
    );

    // A scratch copy of the repository's examples, so that the commands
    // can write their files (replica-a.json, ...) anywhere but the repo.
    let dir = TempDir::new().unwrap();
    fs::create_dir(dir.path().join("examples")).unwrap();
    fs::copy(
        repo_root().join("examples/trace.jsonl"),
        dir.path().join("examples/trace.jsonl"),
    )
    .unwrap();
    // The per-bucket reports of the batch-size table example.
    fs::create_dir(dir.path().join("examples/batch")).unwrap();
    for entry in fs::read_dir(repo_root().join("examples/batch")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            fs::copy(
                &path,
                dir.path()
                    .join("examples/batch")
                    .join(path.file_name().unwrap()),
            )
            .unwrap();
        }
    }
    // The engine fixtures that advise --metrics and --vllm-log read (and
    // the folder of vLLM's log formats, fixtures/vllm_logs).
    copy_dir(
        &repo_root().join("cli/tests/fixtures"),
        &dir.path().join("fixtures"),
    );
    let bin = assert_cmd::cargo::cargo_bin!("specdec-metrics");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let mut ran = 0;
    for block in &consoles {
        for (cmd, expected) in commands(block) {
            let out = Command::new("sh")
                .args(["-c", &format!("exec 2>&1\n{cmd}")])
                .current_dir(dir.path())
                .env("PATH", &path)
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                expected,
                "\n$ {cmd}\nprints something else than docs/cli.md shows"
            );
            ran += 1;
        }
    }
    assert!(ran >= 28, "ran {ran} commands");
}

#[test]
fn manual_shows_the_example_trace_as_it_is() {
    let shown = blocks(&manual(), "json");
    let file = fs::read_to_string(repo_root().join("examples/trace.jsonl")).unwrap();
    assert!(
        shown.contains(&file),
        "no json block of docs/cli.md is examples/trace.jsonl:\n{file}"
    );
}

/// The lines of `text` outside fenced code blocks, with inline code spans
/// blanked out: where headings and links can be.
fn prose(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Backtick runs delimit code spans; drop what they enclose.
        let mut kept = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                kept.push_str(part);
            }
        }
        out.push(kept);
    }
    out
}

/// GitHub's anchor of a heading: lower case, letters, digits, `-` and `_`
/// kept, spaces as `-`, everything else dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The anchors of the headings of a Markdown file (a repeated heading gets
/// `-1`, `-2`, ... as on GitHub).
fn anchors(path: &Path) -> Vec<String> {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            lines.push(line.trim_start_matches('#').replace('`', ""));
        }
    }
    let mut seen = std::collections::HashMap::<String, usize>::new();
    lines
        .iter()
        .map(|heading| {
            let base = slug(heading);
            let n = seen.entry(base.clone()).or_insert(0);
            *n += 1;
            match *n {
                1 => base,
                n => format!("{base}-{}", n - 1),
            }
        })
        .collect()
}

/// Every relative link of the manual (`reference.md#...`,
/// `../examples/trace.jsonl`, `#advise-warnings`) leads somewhere: the
/// file exists, from `docs/`, and so does the heading it names.
#[test]
fn manual_links_lead_somewhere() {
    let docs = repo_root().join("docs");
    let mut checked = 0;
    for line in prose(&manual()) {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').expect("a link ends with )");
            let target = &after[..end];
            rest = &after[end..];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let path = if file.is_empty() {
                docs.join("cli.md")
            } else {
                docs.join(file)
            };
            assert!(path.exists(), "docs/cli.md links to {target}: no such file");
            if !anchor.is_empty() {
                assert!(
                    anchors(&path).iter().any(|a| a == anchor),
                    "docs/cli.md links to {target}: no such heading in {}",
                    path.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "checked {checked} links");
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        slug(" `advise batch`: one draft length per batch size"),
        "advise-batch-one-draft-length-per-batch-size"
    );
    assert_eq!(
        slug("`advise --batch-table`: one"),
        "advise---batch-table-one"
    );
    assert_eq!(
        slug("Reading a report back (v2.1)"),
        "reading-a-report-back-v21"
    );
    let dir = TempDir::new().unwrap();
    let md = dir.path().join("x.md");
    fs::write(
        &md,
        "# Notes\n```rust\n# hidden\n```\n## Notes\n### `Notes`\n",
    )
    .unwrap();
    assert_eq!(anchors(&md), ["notes", "notes-1", "notes-2"]);
}

/// Copies the files of `from`, and of its folders, to `to`.
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &dest);
        } else {
            fs::copy(&path, dest).unwrap();
        }
    }
}
