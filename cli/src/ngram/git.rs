//! `ngram --git REPO`: code-edit requests from a repository's history,
//! through the `git` command (two subprocesses for the whole run: `git log`
//! lists the commits and files, `git cat-file --batch` gives the contents).
//!
//! One request per non-merge commit and file modified in it (not added,
//! deleted or renamed: `--no-renames --diff-filter=M`), oldest first, when
//! at most `max_changed_lines` lines were added plus deleted and the file
//! before the commit has at most `max_bytes` bytes. The prompt is the
//! commit's subject, a blank line and the file before; the output is the
//! file after; the id is `"<short hash>:<path>"`. Files that are not UTF-8
//! text (binary to git, invalid UTF-8 or holding a NUL byte) are skipped and
//! counted in [`Skipped`].

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::error::CliError;
use crate::format::display_path;

/// The longest subject or path read from `git log` (a longer one is cut).
const MAX_LOG_FIELD: u64 = 1 << 20;

/// One request: its id, prompt and output text.
#[derive(Debug)]
pub struct EditRequest {
    /// `"<short hash>:<path>"`.
    pub id: String,
    /// The commit's subject, a blank line, the file before.
    pub prompt: String,
    /// The file after.
    pub output: String,
}

/// Which files were left out, and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Binary to git, not UTF-8, or holding a NUL byte.
    pub not_text: u64,
    /// More added plus deleted lines than `--max-changed-lines`.
    pub too_many_changes: u64,
    /// The file before is larger than `--max-bytes` (or the file after
    /// than four times that).
    pub too_large: u64,
    /// The parent commit is not in the repository (a shallow clone), or
    /// the path holds a newline.
    pub unavailable: u64,
}

/// The filters of `--git`.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `--max-changed-lines`.
    pub max_changed_lines: u64,
    /// `--max-bytes`.
    pub max_bytes: u64,
}

/// The requests of a repository's history, one at a time.
pub struct History {
    log: Child,
    log_out: BufReader<ChildStdout>,
    batch: Child,
    batch_in: ChildStdin,
    batch_out: BufReader<ChildStdout>,
    limits: Limits,
    /// The commit being read: (full hash, short hash, subject).
    commit: Option<(String, String, String)>,
    /// Commits with at least one request.
    pub commits: u64,
    last_commit_counted: Option<String>,
    /// What was skipped so far.
    pub skipped: Skipped,
    field: Vec<u8>,
}

fn git(repo: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(repo);
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    cmd
}

impl History {
    /// Opens the history of the repository at `repo` (a work tree or a
    /// bare repository): an error if it is not one or `git` cannot run.
    pub fn open(repo: &Path, limits: Limits) -> Result<Self, CliError> {
        let shown = display_path(repo);
        if !repo.is_dir() {
            return Err(CliError::new(format!("--git {shown}: no such directory")));
        }
        let check = git(repo)
            .args(["rev-parse", "--git-dir"])
            .stdout(Stdio::null())
            .output()
            .map_err(|e| CliError::new(format!("--git {shown}: cannot run git: {e}")))?;
        // Inside another repository, rev-parse succeeds for a plain
        // subdirectory too: ask for the top level and compare.
        let top = git(repo)
            .args([
                "rev-parse",
                "--is-inside-work-tree",
                "--is-bare-repository",
                "--show-prefix",
            ])
            .stdout(Stdio::piped())
            .output()
            .map_err(|e| CliError::new(format!("--git {shown}: cannot run git: {e}")))?;
        let prefix_ok = String::from_utf8_lossy(&top.stdout)
            .lines()
            .nth(2)
            .is_none_or(|prefix| prefix.is_empty());
        if !check.status.success() || !prefix_ok {
            let why = String::from_utf8_lossy(&check.stderr);
            let why = why.trim();
            return Err(CliError::new(format!(
                "--git {shown}: not a git repository{}",
                if why.is_empty() || check.status.success() {
                    String::new()
                } else {
                    format!(" ({why})")
                }
            )));
        }
        let mut log = git(repo)
            .args([
                "log",
                "--reverse",
                "--no-merges",
                "--no-renames",
                "--diff-filter=M",
                "--numstat",
                "-z",
                "--format=%x01%H%x02%h%x02%s",
                "HEAD",
                "--",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| CliError::new(format!("--git {shown}: cannot run git log: {e}")))?;
        let mut batch = git(repo)
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| CliError::new(format!("--git {shown}: cannot run git cat-file: {e}")))?;
        let log_out = BufReader::new(log.stdout.take().expect("piped"));
        let batch_in = batch.stdin.take().expect("piped");
        let batch_out = BufReader::new(batch.stdout.take().expect("piped"));
        Ok(Self {
            log,
            log_out,
            batch,
            batch_in,
            batch_out,
            limits,
            commit: None,
            commits: 0,
            last_commit_counted: None,
            skipped: Skipped::default(),
            field: Vec::new(),
        })
    }

    /// Reads the next NUL-terminated field of `git log` into `field`;
    /// `false` at its end, once `git log` has exited.
    fn read_field(&mut self) -> Result<bool, CliError> {
        self.field.clear();
        let n = (&mut self.log_out)
            .take(MAX_LOG_FIELD)
            .read_until(0, &mut self.field)
            .map_err(|e| CliError::new(format!("cannot read git log: {e}")))?;
        if n > 0 {
            return Ok(true);
        }
        let status = self
            .log
            .wait()
            .map_err(|e| CliError::new(format!("git log: {e}")))?;
        // A failure before any commit is an empty repository (no HEAD): no
        // history, no requests.
        if !status.success() && self.commit.is_some() {
            return Err(CliError::new(format!("git log failed ({status})")));
        }
        Ok(false)
    }

    /// The next request, or `None` at the end of the history.
    pub fn next_request(&mut self) -> Result<Option<EditRequest>, CliError> {
        loop {
            if !self.read_field()? {
                return Ok(None);
            }
            if self.field.last() == Some(&0) {
                self.field.pop();
            }
            let mut field = &self.field[..];
            while let [b'\n', rest @ ..] = field {
                field = rest;
            }
            if let [1, header @ ..] = field {
                let header = String::from_utf8_lossy(header);
                let mut parts = header.splitn(3, '\u{2}');
                let full = parts.next().unwrap_or_default().to_owned();
                let short = parts.next().unwrap_or_default().to_owned();
                let subject = parts.next().unwrap_or_default().to_owned();
                self.commit = Some((full, short, subject));
                continue;
            }
            if field.is_empty() {
                continue;
            }
            // "added\tdeleted\tpath"; "-\t-\tpath" for a binary file.
            let text = String::from_utf8_lossy(field).into_owned();
            let mut parts = text.splitn(3, '\t');
            let (Some(added), Some(deleted), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Some((full, short, subject)) = self.commit.clone() else {
                continue;
            };
            let (Ok(added), Ok(deleted)) = (added.parse::<u64>(), deleted.parse::<u64>()) else {
                self.skipped.not_text += 1;
                continue;
            };
            if added + deleted > self.limits.max_changed_lines {
                self.skipped.too_many_changes += 1;
                continue;
            }
            if path.contains('\n') || std::str::from_utf8(field).is_err() {
                self.skipped.unavailable += 1;
                continue;
            }
            let Some(before) = self.text(&format!("{full}^:{path}"), self.limits.max_bytes)? else {
                continue;
            };
            let after_limit = self.limits.max_bytes.saturating_mul(4);
            let Some(after) = self.text(&format!("{full}:{path}"), after_limit)? else {
                continue;
            };
            if self.last_commit_counted.as_deref() != Some(full.as_str()) {
                self.commits += 1;
                self.last_commit_counted = Some(full.clone());
            }
            return Ok(Some(EditRequest {
                id: format!("{short}:{path}"),
                prompt: format!("{subject}\n\n{before}"),
                output: after,
            }));
        }
    }

    /// The text of the blob named `spec`, or `None` when it is skipped
    /// (counted in [`Skipped`]: not text, larger than `limit`, missing).
    fn text(&mut self, spec: &str, limit: u64) -> Result<Option<String>, CliError> {
        let skipped = match self.blob(spec, limit)? {
            Blob::Text(text) => return Ok(Some(text)),
            Blob::NotText => &mut self.skipped.not_text,
            Blob::TooLarge => &mut self.skipped.too_large,
            Blob::Missing => &mut self.skipped.unavailable,
        };
        *skipped += 1;
        Ok(None)
    }

    /// The blob named `spec` through `git cat-file --batch`.
    fn blob(&mut self, spec: &str, limit: u64) -> Result<Blob, CliError> {
        let broken = |e: std::io::Error| CliError::new(format!("git cat-file: {e}"));
        writeln!(self.batch_in, "{spec}").map_err(broken)?;
        self.batch_in.flush().map_err(broken)?;
        let mut header = Vec::new();
        (&mut self.batch_out)
            .take(4096)
            .read_until(b'\n', &mut header)
            .map_err(broken)?;
        let header = String::from_utf8_lossy(&header);
        let fields: Vec<&str> = header.split_whitespace().collect();
        let size = match fields.as_slice() {
            [_, "blob", size] => size.parse::<u64>().map_err(|_| {
                CliError::new(format!("git cat-file: unexpected answer {header:?}"))
            })?,
            [_, "missing"] | [_, "ambiguous"] => return Ok(Blob::Missing),
            [_, _kind, size] => {
                // Not a blob (a submodule's commit): skip its content.
                let size = size.parse::<u64>().unwrap_or(0);
                self.drain(size + 1)?;
                return Ok(Blob::Missing);
            }
            _ => {
                return Err(CliError::new(format!(
                    "git cat-file: unexpected answer {header:?}"
                )));
            }
        };
        if size > limit {
            self.drain(size + 1)?;
            return Ok(Blob::TooLarge);
        }
        let mut content = vec![0; size as usize + 1];
        self.batch_out.read_exact(&mut content).map_err(broken)?;
        content.pop(); // the newline after the content
        if content.contains(&0) {
            return Ok(Blob::NotText);
        }
        Ok(match String::from_utf8(content) {
            Ok(text) => Blob::Text(text),
            Err(_) => Blob::NotText,
        })
    }

    fn drain(&mut self, n: u64) -> Result<(), CliError> {
        std::io::copy(&mut (&mut self.batch_out).take(n), &mut std::io::sink())
            .map(|_| ())
            .map_err(|e| CliError::new(format!("git cat-file: {e}")))
    }
}

impl Drop for History {
    fn drop(&mut self) {
        // Stopping early (an error downstream): end both children, which
        // are ours, and reap them.
        let _ = self.log.kill();
        let _ = self.log.wait();
        let _ = self.batch.kill();
        let _ = self.batch.wait();
    }
}

enum Blob {
    Text(String),
    NotText,
    TooLarge,
    Missing,
}
