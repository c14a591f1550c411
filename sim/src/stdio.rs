//! Standard streams as the programs see them: whether standard output was
//! closed before the program started (`>&-`), so that a program refuses to
//! run rather than lose its output.

/// Whether the program was started with standard output closed (`>&-`),
/// as the simulator's programs and the command line tell.
///
/// Rust's runtime reopens a closed standard stream on `/dev/null` before
/// `main`, so that later files cannot take its descriptor; writes then
/// succeed and go nowhere. It opens it for reading and writing, whereas a
/// shell's `> /dev/null` opens it for writing only: a descriptor that is
/// `/dev/null` and can be read from is the closed stream. (`1<> /dev/null`,
/// open for both on purpose, is taken for closed too, which is true of
/// where the report would go.)
#[cfg(unix)]
pub fn stdout_is_closed() -> bool {
    use std::io::Read as _;
    use std::os::fd::AsFd;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};

    let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() else {
        return true; // not even a descriptor
    };
    let file = std::fs::File::from(fd);
    let (Ok(meta), Ok(null)) = (file.metadata(), std::fs::metadata("/dev/null")) else {
        return false;
    };
    meta.file_type().is_char_device()
        && meta.rdev() == null.rdev()
        && (&file).read(&mut [0u8; 1]).is_ok()
}

/// Whether the program was started with standard output closed: not
/// known off Unix, so never.
#[cfg(not(unix))]
pub fn stdout_is_closed() -> bool {
    false
}

/// Ends a program whose work returned `result`: an error is printed on
/// standard error after the program's `name` and the process exits with
/// status 2, except a write to a reader that stopped early (`| head`),
/// which is no error.
///
/// ```
/// use specdec_sim::stdio::finish;
/// // A reader that closed the pipe: the program ends quietly.
/// let closed = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
/// finish("example", Err(closed.into()));
/// finish("example", Ok(()));
/// ```
pub fn finish(name: &str, result: Result<(), Box<dyn std::error::Error>>) {
    if let Err(e) = result {
        let closed = e
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe);
        if !closed {
            eprintln!("{name}: error: {e}");
            std::process::exit(2);
        }
    }
}
