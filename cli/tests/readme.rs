//! The README's command-line section stays true: every `console` example in
//! it is run, from a copy of the repository's `examples/`, and what it
//! prints (standard output and standard error together, in order) must be
//! exactly what the README shows (commands that generate their input, such
//! as the `awk` line of the `advise` example, run too); the example trace
//! it shows is the file `examples/trace.jsonl`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The README's section "Command line: `specdec-metrics`", up to the next
/// level-2 heading.
fn cli_section() -> String {
    let readme = fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme
        .find("## Command line: `specdec-metrics`")
        .expect("the README has a command-line section");
    let rest = &readme[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_owned()
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
fn readme_console_examples_print_what_the_readme_shows() {
    let section = cli_section();
    let consoles = blocks(&section, "console");
    assert!(
        consoles.len() >= 10,
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
    // The per-bucket reports of the `advise --batch-table` example.
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
                "\n$ {cmd}\nprints something else than the README shows"
            );
            ran += 1;
        }
    }
    assert!(ran >= 21, "ran {ran} commands");
}

#[test]
fn readme_shows_the_example_trace_as_it_is() {
    let section = cli_section();
    let shown = blocks(&section, "json");
    let file = fs::read_to_string(repo_root().join("examples/trace.jsonl")).unwrap();
    assert!(
        shown.contains(&file),
        "no json block of the command-line section is examples/trace.jsonl:\n{file}"
    );
}
