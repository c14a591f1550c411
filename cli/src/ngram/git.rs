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
//! text (binary to git, invalid UTF-8 or holding a NUL byte), submodules and
//! symbolic links (their modes from `git log --raw`) are skipped and counted
//! in [`Skipped`].

use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;

use crate::format::display_path;

/// The longest subject or path read from `git log` (a longer one is cut).
const MAX_LOG_FIELD: u64 = 1 << 20;

/// The most of `git log`'s standard error quoted in a message.
const MAX_LOG_STDERR: u64 = 4096;

/// Why a repository's history could not be read. It names the repository
/// and the `git` command that failed; the command line maps it to its flag
/// (`--git REPO: ...`).
#[derive(Debug)]
pub enum GitError {
    /// The repository at `repo` cannot be read: `problem`.
    Repository {
        /// The repository as given.
        repo: PathBuf,
        /// What is wrong with it.
        problem: RepoProblem,
    },
    /// `git log`'s output could not be read.
    ReadLog(io::Error),
    /// `git log` could not be waited for.
    WaitLog(io::Error),
    /// `git cat-file --batch` could not be written to or read.
    CatFile(io::Error),
    /// `git cat-file --batch` answered a header it does not give.
    CatFileAnswer(String),
}

/// What is wrong with a repository ([`GitError::Repository`]).
#[derive(Debug)]
pub enum RepoProblem {
    /// The path is not a directory.
    NoSuchDirectory,
    /// `command` ("git", "git log", "git cat-file") could not be started.
    CannotRun {
        /// The command, as messages name it.
        command: &'static str,
        /// Why.
        source: io::Error,
    },
    /// Not a work tree or a bare repository (nor its top level); what
    /// `git rev-parse` said, if it said anything.
    NotARepository(Option<String>),
    /// `git log` ended with `status`.
    LogFailed {
        /// Its exit status.
        status: ExitStatus,
        /// The non-blank lines of its standard error, trimmed.
        said: Vec<String>,
        /// The branch HEAD names, which does not exist though the
        /// repository has had commits.
        missing_branch: Option<String>,
    },
}

impl GitError {
    /// The repository at `repo` cannot be read: `problem`.
    pub(crate) fn repository(repo: &Path, problem: RepoProblem) -> Self {
        GitError::Repository {
            repo: repo.to_owned(),
            problem,
        }
    }

    /// `command` could not be started in the repository at `repo`.
    pub(crate) fn cannot_run<'a>(
        repo: &'a Path,
        command: &'static str,
    ) -> impl FnOnce(io::Error) -> Self + 'a {
        move |source| Self::repository(repo, RepoProblem::CannotRun { command, source })
    }
}

impl fmt::Display for GitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GitError::Repository { repo, problem } => {
                write!(f, "the repository {}: {problem}", display_path(repo))
            }
            GitError::ReadLog(e) => write!(f, "cannot read git log: {e}"),
            GitError::WaitLog(e) => write!(f, "git log: {e}"),
            GitError::CatFile(e) => write!(f, "git cat-file: {e}"),
            GitError::CatFileAnswer(header) => {
                write!(f, "git cat-file: unexpected answer {header:?}")
            }
        }
    }
}

impl std::error::Error for GitError {}

impl fmt::Display for RepoProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RepoProblem::NoSuchDirectory => f.write_str("no such directory"),
            RepoProblem::CannotRun { command, source } => {
                write!(f, "cannot run {command}: {source}")
            }
            RepoProblem::NotARepository(None) => f.write_str("not a git repository"),
            RepoProblem::NotARepository(Some(why)) => write!(f, "not a git repository ({why})"),
            RepoProblem::LogFailed {
                status,
                said,
                missing_branch,
            } => {
                write!(f, "git log failed ({status})")?;
                if !said.is_empty() {
                    write!(f, ": {}", said.join("; "))?;
                }
                if let Some(branch) = missing_branch {
                    write!(
                        f,
                        "; HEAD names {branch}, which does not exist, though the repository has had commits (a ref, or HEAD's reflog)"
                    )?;
                }
                Ok(())
            }
        }
    }
}

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
    /// A submodule (a commit of another repository, not a file).
    pub submodules: u64,
    /// A symbolic link (its target is not an edit of a file).
    pub symlinks: u64,
}

impl Skipped {
    /// Adds `other`'s counts to these (the files skipped by several
    /// sources read into one trace).
    pub fn add(&mut self, other: &Skipped) {
        self.not_text += other.not_text;
        self.too_many_changes += other.too_many_changes;
        self.too_large += other.too_large;
        self.unavailable += other.unavailable;
        self.submodules += other.submodules;
        self.symlinks += other.symlinks;
    }
}

/// What a path of a commit is, from `git log --raw`'s modes, when it is
/// not a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NotFile {
    Submodule,
    Symlink,
}

impl NotFile {
    /// From a raw entry's header, `:100644 100644 <hash> <hash> M`: a
    /// submodule (mode 160000) or a symbolic link (120000) on either side.
    fn of(header: &[u8]) -> Option<Self> {
        let header = std::str::from_utf8(header).ok()?;
        let modes = header.split(' ').take(2);
        let mut found = None;
        for mode in modes {
            match mode {
                "160000" => return Some(NotFile::Submodule),
                "120000" => found = Some(NotFile::Symlink),
                _ => {}
            }
        }
        found
    }
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
    repo: PathBuf,
    log: Child,
    log_out: BufReader<ChildStdout>,
    /// The start of `git log`'s standard error, read by a thread of its
    /// own (the rest is drained, so that `git log` never blocks on it).
    log_err: Option<JoinHandle<Vec<u8>>>,
    cat_file: CatFile,
    limits: Limits,
    /// The commit being read: (full hash, short hash, subject).
    commit: Option<(String, String, String)>,
    /// Commits with at least one request.
    pub commits: u64,
    last_commit_counted: Option<String>,
    /// What was skipped so far.
    pub skipped: Skipped,
    /// At the end: the branch HEAD names, when the repository is new (no
    /// ref at all, so no commit to read).
    pub unborn: Option<String>,
    field: Vec<u8>,
    /// The raw entry whose path is the next field: `Some(None)` for a
    /// file.
    raw_pending: Option<Option<NotFile>>,
    /// The paths of the commit being read that are not files.
    not_files: HashMap<Vec<u8>, NotFile>,
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
    pub fn open(repo: &Path, limits: Limits) -> Result<Self, GitError> {
        if !repo.is_dir() {
            return Err(GitError::repository(repo, RepoProblem::NoSuchDirectory));
        }
        let check = git(repo)
            .args(["rev-parse", "--git-dir"])
            .stdout(Stdio::null())
            .output()
            .map_err(GitError::cannot_run(repo, "git"))?;
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
            .map_err(GitError::cannot_run(repo, "git"))?;
        let prefix_ok = String::from_utf8_lossy(&top.stdout)
            .lines()
            .nth(2)
            .is_none_or(|prefix| prefix.is_empty());
        if !check.status.success() || !prefix_ok {
            let why = String::from_utf8_lossy(&check.stderr);
            let why = why.trim();
            let said = (!why.is_empty() && !check.status.success()).then(|| why.to_owned());
            return Err(GitError::repository(
                repo,
                RepoProblem::NotARepository(said),
            ));
        }
        let mut log = git(repo)
            .args([
                "log",
                "--reverse",
                "--no-merges",
                "--no-renames",
                "--diff-filter=M",
                "--raw",
                "--numstat",
                "-z",
                "--format=%x01%H%x02%h%x02%s",
                "HEAD",
                "--",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(GitError::cannot_run(repo, "git log"))?;
        let log_err = log.stderr.take().map(|stderr| {
            std::thread::spawn(move || {
                let mut stderr = stderr;
                let mut kept = Vec::new();
                let _ = (&mut stderr).take(MAX_LOG_STDERR).read_to_end(&mut kept);
                let _ = std::io::copy(&mut stderr, &mut std::io::sink());
                kept
            })
        });
        let cat_file = CatFile::spawn(repo).map_err(GitError::cannot_run(repo, "git cat-file"))?;
        let log_out = BufReader::new(log.stdout.take().expect("piped"));
        Ok(Self {
            repo: repo.to_owned(),
            log,
            log_out,
            log_err,
            cat_file,
            limits,
            commit: None,
            commits: 0,
            last_commit_counted: None,
            skipped: Skipped::default(),
            unborn: None,
            field: Vec::new(),
            raw_pending: None,
            not_files: HashMap::new(),
        })
    }

    /// Reads the next NUL-terminated field of `git log` into `field`;
    /// `false` at its end, once `git log` has exited.
    fn read_field(&mut self) -> Result<bool, GitError> {
        self.field.clear();
        let n = (&mut self.log_out)
            .take(MAX_LOG_FIELD)
            .read_until(0, &mut self.field)
            .map_err(GitError::ReadLog)?;
        if n > 0 {
            return Ok(true);
        }
        let status = self.log.wait().map_err(GitError::WaitLog)?;
        if status.success() {
            return Ok(false);
        }
        let stderr = self
            .log_err
            .take()
            .and_then(|reader| reader.join().ok())
            .unwrap_or_default();
        let stderr = String::from_utf8_lossy(&stderr);
        let said: Vec<String> = stderr
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .map(str::to_owned)
            .collect();
        let mut missing_branch = None;
        // Before any commit, a HEAD that names a branch which does not
        // exist: in a repository that never had a commit, a new one (no
        // commits, no requests); else an error.
        if self.commit.is_none() {
            if let Some(branch) = self.missing_branch() {
                if !self.had_commits() {
                    self.unborn = Some(branch);
                    return Ok(false);
                }
                missing_branch = Some(branch);
            }
        }
        Err(GitError::repository(
            &self.repo,
            RepoProblem::LogFailed {
                status,
                said,
                missing_branch,
            },
        ))
    }

    /// The branch HEAD names when it does not exist (an unborn branch).
    fn missing_branch(&self) -> Option<String> {
        let named = git(&self.repo)
            .args(["symbolic-ref", "-q", "HEAD"])
            .stdout(Stdio::piped())
            .output()
            .ok()
            .filter(|out| out.status.success())?;
        let exists = git(&self.repo)
            .args(["rev-parse", "-q", "--verify", "HEAD"])
            .stdout(Stdio::null())
            .output()
            .ok()?;
        (exists.status.code() == Some(1))
            .then(|| String::from_utf8_lossy(&named.stdout).trim().to_owned())
    }

    /// Whether the repository has any ref (branch, tag, remote branch) or
    /// a reflog of HEAD (a branch's ref deleted by hand leaves it), or
    /// cannot tell.
    fn had_commits(&self) -> bool {
        let refs = git(&self.repo)
            .args(["for-each-ref", "--count=1"])
            .stdout(Stdio::piped())
            .output();
        if refs.map_or(true, |out| !out.status.success() || !out.stdout.is_empty()) {
            return true;
        }
        let Ok(reflog) = git(&self.repo)
            .args(["rev-parse", "--git-path", "logs/HEAD"])
            .stdout(Stdio::piped())
            .output()
        else {
            return true;
        };
        let path = String::from_utf8_lossy(&reflog.stdout);
        let path = self.repo.join(path.trim_end_matches('\n'));
        !reflog.status.success() || std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
    }

    /// The next request, or `None` at the end of the history.
    pub fn next_request(&mut self) -> Result<Option<EditRequest>, GitError> {
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
                self.not_files.clear();
                self.raw_pending = None;
                continue;
            }
            if let Some(kind) = self.raw_pending.take() {
                // The path of a raw entry (`-z`: a field of its own).
                if let Some(kind) = kind {
                    self.not_files.insert(field.to_vec(), kind);
                }
                continue;
            }
            if let [b':', header @ ..] = field {
                self.raw_pending = Some(NotFile::of(header));
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
            // The path's bytes: after the second tab.
            let path_bytes = field.splitn(3, |&b| b == b'\t').nth(2).unwrap_or_default();
            match self.not_files.get(path_bytes) {
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
            let Some(before) = self.cat_file.text(
                &format!("{full}^:{path}"),
                self.limits.max_bytes,
                &mut self.skipped,
            )?
            else {
                continue;
            };
            let after_limit = self.limits.max_bytes.saturating_mul(4);
            let Some(after) =
                self.cat_file
                    .text(&format!("{full}:{path}"), after_limit, &mut self.skipped)?
            else {
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
}

impl Drop for History {
    fn drop(&mut self) {
        // Stopping early (an error downstream): end `git log`, which is
        // ours, and reap it (`cat_file` ends its own).
        let _ = self.log.kill();
        let _ = self.log.wait();
        if let Some(reader) = self.log_err.take() {
            let _ = reader.join();
        }
    }
}

/// `git cat-file --batch` on a repository: the blobs of the edits, one at a
/// time, through one child process (ended and reaped when dropped).
pub(crate) struct CatFile {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl CatFile {
    /// Starts `git cat-file --batch` in `repo`.
    pub(crate) fn spawn(repo: &Path) -> std::io::Result<Self> {
        let mut child = git(repo)
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let input = child.stdin.take().expect("piped");
        let output = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Self {
            child,
            input,
            output,
        })
    }

    /// The text of the blob named `spec`, or `None` when it is skipped
    /// (counted in [`Skipped`]: not text, larger than `limit`, missing).
    pub(crate) fn text(
        &mut self,
        spec: &str,
        limit: u64,
        skipped: &mut Skipped,
    ) -> Result<Option<String>, GitError> {
        let skipped = match self.blob(spec, limit)? {
            Blob::Text(text) => return Ok(Some(text)),
            Blob::NotText => &mut skipped.not_text,
            Blob::TooLarge => &mut skipped.too_large,
            Blob::Missing => &mut skipped.unavailable,
        };
        *skipped += 1;
        Ok(None)
    }

    /// The blob named `spec` through `git cat-file --batch`.
    fn blob(&mut self, spec: &str, limit: u64) -> Result<Blob, GitError> {
        let broken = GitError::CatFile;
        writeln!(self.input, "{spec}").map_err(broken)?;
        self.input.flush().map_err(broken)?;
        let mut header = Vec::new();
        (&mut self.output)
            .take(4096)
            .read_until(b'\n', &mut header)
            .map_err(broken)?;
        let header = String::from_utf8_lossy(&header);
        let fields: Vec<&str> = header.split_whitespace().collect();
        let size = match fields.as_slice() {
            [_, "blob", size] => size
                .parse::<u64>()
                .map_err(|_| GitError::CatFileAnswer(header.clone().into_owned()))?,
            [_, "missing"] | [_, "ambiguous"] => return Ok(Blob::Missing),
            [_, _kind, size] => {
                // Not a blob (a submodule's commit): skip its content.
                let size = size.parse::<u64>().unwrap_or(0);
                self.drain(size + 1)?;
                return Ok(Blob::Missing);
            }
            _ => {
                return Err(GitError::CatFileAnswer(header.clone().into_owned()));
            }
        };
        if size > limit {
            self.drain(size + 1)?;
            return Ok(Blob::TooLarge);
        }
        let mut content = vec![0; size as usize + 1];
        self.output.read_exact(&mut content).map_err(broken)?;
        content.pop(); // the newline after the content
        if content.contains(&0) {
            return Ok(Blob::NotText);
        }
        Ok(match String::from_utf8(content) {
            Ok(text) => Blob::Text(text),
            Err(_) => Blob::NotText,
        })
    }

    fn drain(&mut self, n: u64) -> Result<(), GitError> {
        std::io::copy(&mut (&mut self.output).take(n), &mut std::io::sink())
            .map(|_| ())
            .map_err(GitError::CatFile)
    }
}

impl Drop for CatFile {
    fn drop(&mut self) {
        // Stopping early (an error downstream): end the child, which is
        // ours, and reap it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

enum Blob {
    Text(String),
    NotText,
    TooLarge,
    Missing,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_counts_add_field_by_field() {
        let counts = |base: u64| Skipped {
            not_text: base + 1,
            too_many_changes: base + 2,
            too_large: base + 3,
            unavailable: base + 4,
            submodules: base + 5,
            symlinks: base + 6,
        };
        let mut sum = counts(10);
        sum.add(&counts(20));
        // Every field the sum of its two counts: 11 + 21, 12 + 22, ...
        assert_eq!(
            sum,
            Skipped {
                not_text: 32,
                too_many_changes: 34,
                too_large: 36,
                unavailable: 38,
                submodules: 40,
                symlinks: 42,
            }
        );
    }

    #[test]
    fn errors_name_the_repository_not_a_flag() {
        let limits = Limits {
            max_changed_lines: 1,
            max_bytes: 1,
        };
        let missing = Path::new("no/such/repository");
        let Err(e) = History::open(missing, limits) else {
            panic!("a missing directory opened");
        };
        assert!(matches!(
            &e,
            GitError::Repository {
                repo,
                problem: RepoProblem::NoSuchDirectory,
            } if repo == missing
        ));
        assert_eq!(
            e.to_string(),
            "the repository no/such/repository: no such directory"
        );
        let failed = RepoProblem::NotARepository(Some("fatal: no".into()));
        assert_eq!(failed.to_string(), "not a git repository (fatal: no)");
        assert_eq!(
            GitError::CatFileAnswer("x y\n".into()).to_string(),
            "git cat-file: unexpected answer \"x y\\n\""
        );
    }
}
