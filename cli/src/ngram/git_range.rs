//! `ngram --git REPO --git-range FROM..TO`: long code-edit requests, one per
//! file modified between two commits (release tags, typically), not one per
//! commit.
//!
//! `git diff --raw -z --no-renames --diff-filter=M FROM TO` lists the files
//! modified (not added, deleted or renamed) with their modes and the hashes
//! of both versions; `git cat-file --batch` gives the contents and `git diff
//! --numstat` of the two blobs the added plus deleted lines. The prompt is a
//! one-line subject naming the range and the path, a blank line and the
//! file at `FROM`; the output is the file at `TO`; the id is
//! `"<FROM>..<TO>:<path>"`, as `FROM` and `TO` were given. The skips are
//! `--git`'s ([`Skipped`]): files that are not UTF-8 text, submodules,
//! symbolic links, more changed lines than `max_changed_lines`, a file at
//! `FROM` larger than `max_bytes` (at `TO`, four times that), and blobs the
//! repository lacks (a partial clone) or paths holding a newline. Each file
//! skipped is counted once, under the first reason found, in that order
//! (the sizes before the line count, so that a large file is never diffed).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::format::display_path;
use crate::ngram::git::{CatFile, EditRequest, Limits, Skipped};

/// `--max-changed-lines` with `--git-range` unless given: a release's
/// rewrite of a file, not only a commit's touch.
pub const RANGE_MAX_CHANGED_LINES: u64 = 4000;

/// `--max-bytes` with `--git-range` unless given (256 KiB).
pub const RANGE_MAX_BYTES: u64 = 256 << 10;

/// The most of a `git` command's standard error quoted in a message.
const MAX_STDERR: usize = 4096;

/// `FROM..TO`: two revisions, both named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeSpec {
    /// The older end, as given.
    pub from: String,
    /// The newer end, as given.
    pub to: String,
}

impl std::fmt::Display for RangeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}..{}", self.from, self.to)
    }
}

/// `--git-range FROM..TO`: both ends given, two dots (not `...`, which
/// names a merge base).
pub fn parse_range(s: &str) -> Result<RangeSpec, String> {
    let shown = crate::format::excerpt(s);
    let Some((from, to)) = s.split_once("..") else {
        return Err(format!(
            "{shown} is not a range: write FROM..TO (two commits or tags)"
        ));
    };
    if to.starts_with('.') {
        return Err(format!(
            "{shown}: FROM...TO (three dots) names a merge base; write FROM..TO"
        ));
    }
    if from.is_empty() || to.is_empty() {
        return Err(format!(
            "{shown}: both ends must be given: write FROM..TO (two commits or tags)"
        ));
    }
    Ok(RangeSpec {
        from: from.to_owned(),
        to: to.to_owned(),
    })
}

fn git(repo: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(repo);
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    cmd
}

/// What git said on standard error, on one line (`"; "` between lines).
fn said(stderr: &[u8]) -> String {
    let stderr = String::from_utf8_lossy(&stderr[..stderr.len().min(MAX_STDERR)]);
    stderr
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// One modified file of the range, from a raw entry.
struct Entry {
    path: Vec<u8>,
    /// The blob at `FROM` and at `TO` (full hashes).
    before: String,
    after: String,
    /// A submodule or a symbolic link on either side.
    not_file: Option<NotFile>,
}

#[derive(Clone, Copy)]
enum NotFile {
    Submodule,
    Symlink,
}

/// The requests of a range, one file at a time.
pub struct Range {
    repo: std::path::PathBuf,
    spec: RangeSpec,
    entries: std::vec::IntoIter<Entry>,
    /// Started at the first blob read, ended once every file is read: a
    /// run of many ranges keeps one `git cat-file` at a time.
    cat_file: Option<CatFile>,
    limits: Limits,
    /// Files modified in the range (every raw entry, skipped or not).
    pub files: u64,
    /// What was skipped so far.
    pub skipped: Skipped,
}

/// Why a range cannot be read. It names the repository or the range, never
/// a flag: the command line puts its flags in front.
#[derive(Debug)]
pub enum RangeError {
    /// The repository at `repo` cannot be read.
    Repository {
        /// The repository as given.
        repo: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The range cannot be read in the repository.
    Range {
        /// The range as given.
        spec: RangeSpec,
        /// What is wrong with it (git's own words quoted).
        problem: String,
    },
    /// git failed while the range was read.
    Git(String),
}

impl RangeError {
    fn repository(repo: &Path, problem: String) -> Self {
        Self::Repository {
            repo: repo.to_owned(),
            problem,
        }
    }
}

impl std::fmt::Display for RangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Repository { repo, problem } => write!(f, "{}: {problem}", display_path(repo)),
            Self::Range { spec, problem } => write!(f, "range {spec}: {problem}"),
            Self::Git(problem) => f.write_str(problem),
        }
    }
}

impl std::error::Error for RangeError {}

impl Range {
    /// Checks that `repo` is a repository and both ends of `spec` name
    /// commits there (an error quoting git otherwise), and lists the files
    /// modified between them.
    pub fn open(repo: &Path, spec: RangeSpec, limits: Limits) -> Result<Self, RangeError> {
        if !repo.is_dir() {
            return Err(RangeError::repository(repo, "no such directory".into()));
        }
        let cannot_run =
            |e: std::io::Error| RangeError::repository(repo, format!("cannot run git: {e}"));
        // Inside another repository, rev-parse succeeds for a plain
        // subdirectory too: its prefix must be empty.
        let top = git(repo)
            .args(["rev-parse", "--show-prefix"])
            .stdout(Stdio::piped())
            .output()
            .map_err(cannot_run)?;
        if !top.status.success() || !String::from_utf8_lossy(&top.stdout).trim().is_empty() {
            let why = said(&top.stderr);
            return Err(RangeError::repository(
                repo,
                format!(
                    "not a git repository{}",
                    if why.is_empty() || top.status.success() {
                        String::new()
                    } else {
                        format!(" ({why})")
                    }
                ),
            ));
        }
        let from = resolve(repo, &spec, &spec.from)?;
        let to = resolve(repo, &spec, &spec.to)?;
        let diff = git(repo)
            .args([
                "diff",
                "--raw",
                "-z",
                "--no-abbrev",
                "--no-renames",
                "--no-ext-diff",
                "--diff-filter=M",
                &from,
                &to,
                "--",
            ])
            .stdout(Stdio::piped())
            .output()
            .map_err(cannot_run)?;
        if !diff.status.success() {
            return Err(RangeError::Range {
                spec,
                problem: format!("git diff failed ({}): {}", diff.status, said(&diff.stderr)),
            });
        }
        let entries = raw_entries(&diff.stdout);
        Ok(Self {
            repo: repo.to_owned(),
            spec,
            files: entries.len() as u64,
            entries: entries.into_iter(),
            cat_file: None,
            limits,
            skipped: Skipped::default(),
        })
    }

    /// The range read.
    pub fn spec(&self) -> &RangeSpec {
        &self.spec
    }

    /// The next request, or `None` once every file of the range is read.
    pub fn next_request(&mut self) -> Result<Option<EditRequest>, RangeError> {
        while let Some(entry) = self.entries.next() {
            match entry.not_file {
                Some(NotFile::Submodule) => {
                    self.skipped.submodules += 1;
                    continue;
                }
                Some(NotFile::Symlink) => {
                    self.skipped.symlinks += 1;
                    continue;
                }
                None => {}
            }
            let path = match String::from_utf8(entry.path) {
                Ok(path) if !path.contains('\n') => path,
                _ => {
                    self.skipped.unavailable += 1;
                    continue;
                }
            };
            let Some(before) = self.text(&entry.before, self.limits.max_bytes)? else {
                continue;
            };
            let Some(after) = self.text(&entry.after, self.limits.max_bytes.saturating_mul(4))?
            else {
                continue;
            };
            match self.changed_lines(&entry.before, &entry.after)? {
                None => {
                    self.skipped.not_text += 1;
                    continue;
                }
                Some(n) if n > self.limits.max_changed_lines => {
                    self.skipped.too_many_changes += 1;
                    continue;
                }
                Some(_) => {}
            }
            let spec = &self.spec;
            return Ok(Some(EditRequest {
                id: format!("{spec}:{path}"),
                prompt: format!("{spec}: {path}\n\n{before}"),
                output: after,
            }));
        }
        self.cat_file = None;
        Ok(None)
    }

    /// Added plus deleted lines between two blobs (`git diff --numstat`);
    /// `None` when git takes them for binary.
    fn changed_lines(&self, before: &str, after: &str) -> Result<Option<u64>, RangeError> {
        let out = git(&self.repo)
            .args([
                "diff",
                "--numstat",
                "--no-ext-diff",
                "--no-textconv",
                before,
                after,
            ])
            .stdout(Stdio::piped())
            .output()
            .map_err(|e| RangeError::Git(format!("cannot run git diff: {e}")))?;
        if !out.status.success() {
            return Err(RangeError::Range {
                spec: self.spec.clone(),
                problem: format!(
                    "git diff --numstat {before} {after} failed ({}): {}",
                    out.status,
                    said(&out.stderr)
                ),
            });
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut fields = text.split('\t');
        let (Some(added), Some(deleted)) = (fields.next(), fields.next()) else {
            // No difference at all (a mode change alone).
            return Ok(Some(0));
        };
        Ok(match (added.parse::<u64>(), deleted.parse::<u64>()) {
            (Ok(added), Ok(deleted)) => Some(added + deleted),
            _ => None,
        })
    }

    /// The text of the blob `hash`, or `None` when it is skipped (counted
    /// in [`Skipped`]: not text, larger than `limit`, missing).
    fn text(&mut self, hash: &str, limit: u64) -> Result<Option<String>, RangeError> {
        let cat_file = match &mut self.cat_file {
            Some(cat_file) => cat_file,
            None => self
                .cat_file
                .insert(CatFile::spawn(&self.repo).map_err(|e| {
                    RangeError::repository(&self.repo, format!("cannot run git cat-file: {e}"))
                })?),
        };
        cat_file
            .text(hash, limit, &mut self.skipped)
            .map_err(|e| RangeError::Git(e.to_string()))
    }
}

/// The commit `rev` names in `repo` (its full hash), or an error quoting
/// git.
fn resolve(repo: &Path, spec: &RangeSpec, rev: &str) -> Result<String, RangeError> {
    let out = git(repo)
        .args([
            "rev-parse",
            "--end-of-options",
            &format!("{rev}^{{commit}}"),
            "--",
        ])
        .stdout(Stdio::piped())
        .output()
        .map_err(|e| RangeError::repository(repo, format!("cannot run git: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let hash = stdout
        .lines()
        .find(|line| line.len() >= 40 && line.bytes().all(|b| b.is_ascii_hexdigit()));
    match (out.status.success(), hash) {
        (true, Some(hash)) => Ok(hash.to_owned()),
        _ => Err(RangeError::Range {
            spec: spec.clone(),
            problem: format!(
                "{} does not name a commit in {}: git rev-parse: {}",
                crate::format::excerpt(rev),
                display_path(repo),
                said(&out.stderr)
            ),
        }),
    }
}

/// The entries of `git diff --raw -z`: `:<mode> <mode> <hash> <hash>
/// <status>`, NUL, the path, NUL.
fn raw_entries(raw: &[u8]) -> Vec<Entry> {
    let mut fields = raw.split(|&b| b == 0);
    let mut entries = Vec::new();
    while let Some(header) = fields.next() {
        let Some(header) = header.strip_prefix(b":") else {
            continue;
        };
        let Some(path) = fields.next() else {
            break;
        };
        let header = String::from_utf8_lossy(header);
        let parts: Vec<&str> = header.split(' ').collect();
        let [old_mode, new_mode, before, after, ..] = parts.as_slice() else {
            continue;
        };
        let modes = [*old_mode, *new_mode];
        let not_file = if modes.contains(&"160000") {
            Some(NotFile::Submodule)
        } else if modes.contains(&"120000") {
            Some(NotFile::Symlink)
        } else {
            None
        };
        entries.push(Entry {
            path: path.to_vec(),
            before: (*before).to_owned(),
            after: (*after).to_owned(),
            not_file,
        });
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_needs_both_ends_and_two_dots() {
        let ok = parse_range("v1.0..v2.0").unwrap();
        assert_eq!((ok.from.as_str(), ok.to.as_str()), ("v1.0", "v2.0"));
        assert_eq!(ok.to_string(), "v1.0..v2.0");
        for bad in ["v1.0", "..v2", "v1..", "v1...v2", ""] {
            assert!(parse_range(bad).is_err(), "{bad:?}");
        }
        assert!(parse_range("v1...v2").unwrap_err().contains("three dots"));
    }

    #[test]
    fn raw_entries_read_modes_hashes_and_paths() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let raw = format!(
            ":100644 100644 {a} {b} M\0src/x.rs\0:160000 160000 {a} {b} M\0sub\0:120000 120000 {a} {b} M\0link\0"
        );
        let entries = raw_entries(raw.as_bytes());
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].path, b"src/x.rs");
        assert_eq!(
            (entries[0].before.as_str(), entries[0].after.as_str()),
            (a.as_str(), b.as_str())
        );
        assert!(entries[0].not_file.is_none());
        assert!(matches!(entries[1].not_file, Some(NotFile::Submodule)));
        assert!(matches!(entries[2].not_file, Some(NotFile::Symlink)));
    }
}
