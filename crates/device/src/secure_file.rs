//! The rules every file that holds cached data or a store's values is opened and created by
//! (docs/reliability.md, "Files on disk"): cache and PM tiers, BTTs, PolyEMT regions and the
//! key-value tenants' values files all come through [`open_storage`].
//!
//! - A new file is created with mode 0600 and `O_CREAT | O_EXCL | O_NOFOLLOW`: only its owner
//!   reads it, and a link or file planted at the path in the meantime fails the create instead
//!   of being written through.
//! - An existing regular file is opened with `O_NOFOLLOW`: a symbolic link is refused, and so is
//!   a file that another user owns (they could read it, or truncate it under the mapping and
//!   crash the server with SIGBUS). A file of this user's that group or others may read or
//!   write is tightened to 0600, with a warning.
//! - A block or character device (`/dev/loop0`, a disk, `/dev/pmem0`) is opened as it is,
//!   through symbolic links too (`/dev/disk/by-id/...` are links): who may open a device is the
//!   system's udev rules' business, and its ownership is not refused.
//! - A file grown to a size is preallocated (`fallocate`), not left sparse: on a file system
//!   mapped without `MAP_SYNC`, data flushed into blocks allocated at fault time can read back
//!   as zeros after a power cut, and a full file system turns into SIGBUS on a mapped store.
//!   Where the file system cannot preallocate, the file is grown sparse, with a warning. A
//!   grown file is fsynced, and a created one's directory too, so that the file and its size
//!   survive a power cut before the first write does.
//!
//! Secrets (TLS keys, PSK files, authentication files) are only read; [`warn_if_exposed`] says
//! when group or others may read one.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// The mode a created file gets: read and write for its owner only.
pub const CREATE_MODE: u32 = 0o600;

/// Permission bits of group and others.
const OTHERS_BITS: u32 = 0o077;

/// A storage file, opened by [`open_storage`].
#[derive(Debug)]
pub struct StorageFile {
    pub file: File,
    /// A block or character device, opened as it is (never grown).
    pub device: bool,
    /// This open created it.
    pub created: bool,
}

/// Opens `path` read-write for storage, by the module's rules; `flags` are further open flags
/// (`O_DIRECT`). With `size_bytes`, a missing file is created, and a regular file shorter than
/// that is grown to it, preallocated (never shrunk); without, the file must exist. Devices are
/// never grown: their size is the caller's to check. Errors name the path.
pub fn open_storage(
    path: &Path,
    size_bytes: Option<u64>,
    flags: libc::c_int,
) -> io::Result<StorageFile> {
    // A file created by someone else between the look and the create: look again, once.
    for _ in 0..2 {
        let opened = match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => match std::fs::metadata(path) {
                Ok(target) if is_device(&target) => open_device(path, flags)?,
                _ => {
                    return Err(refused(
                        path,
                        "is a symbolic link; give the file's own path (only block and \
                         character devices are opened through links)",
                    ))
                }
            },
            Ok(meta) if is_device(&meta) => open_device(path, flags)?,
            Ok(meta) if meta.is_file() => open_own_file(path, flags)?,
            Ok(meta) => {
                let what = if meta.is_dir() {
                    "is a directory"
                } else {
                    "is neither a regular file nor a device"
                };
                return Err(refused(path, what));
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound && size_bytes.is_some() => {
                match create_file(path, flags) {
                    Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
                    other => other?,
                }
            }
            Err(error) => return Err(annotate(path, "cannot open", error)),
        };
        if let (Some(size), false) = (size_bytes, opened.device) {
            grow(&opened.file, path, size)?;
        }
        if opened.created {
            sync_parent(path)?;
        }
        return Ok(opened);
    }
    Err(refused(
        path,
        "appeared while being created; another process is making it",
    ))
}

fn is_device(meta: &std::fs::Metadata) -> bool {
    meta.file_type().is_block_device() || meta.file_type().is_char_device()
}

fn options(flags: libc::c_int) -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true).write(true).custom_flags(flags);
    options
}

fn open_device(path: &Path, flags: libc::c_int) -> io::Result<StorageFile> {
    let file = options(flags)
        .open(path)
        .map_err(|error| annotate(path, "cannot open", error))?;
    Ok(StorageFile {
        file,
        device: true,
        created: false,
    })
}

/// An existing regular file: not through a link, this user's own, and only its owner's to
/// read and write (tightened so when it was not).
fn open_own_file(path: &Path, flags: libc::c_int) -> io::Result<StorageFile> {
    let file = options(flags | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|error| match error.raw_os_error() {
            Some(libc::ELOOP) => refused(path, "is a symbolic link; give the file's own path"),
            _ => annotate(path, "cannot open", error),
        })?;
    let meta = file.metadata()?;
    if is_device(&meta) {
        // Replaced by a device node since the look: opened as any device is.
        return Ok(StorageFile {
            file,
            device: true,
            created: false,
        });
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(refused(
            path,
            &format!(
                "is owned by uid {}, not by this user (uid {me}); a storage file must be the \
                 server's own",
                meta.uid()
            ),
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & OTHERS_BITS != 0 {
        let tightened = mode & !OTHERS_BITS | CREATE_MODE;
        file.set_permissions(std::fs::Permissions::from_mode(tightened))
            .map_err(|error| annotate(path, "cannot chmod", error))?;
        eprintln!(
            "heterarchy: warning: {} was mode {mode:04o}, open to group or others; now {tightened:04o}",
            path.display()
        );
    }
    Ok(StorageFile {
        file,
        device: false,
        created: false,
    })
}

fn create_file(path: &Path, flags: libc::c_int) -> io::Result<StorageFile> {
    let file = options(flags | libc::O_NOFOLLOW)
        .create_new(true)
        .mode(CREATE_MODE)
        .open(path)
        .map_err(|error| match error.kind() {
            io::ErrorKind::AlreadyExists => error,
            _ => annotate(path, "cannot create", error),
        })?;
    Ok(StorageFile {
        file,
        device: false,
        created: true,
    })
}

/// Grows `file` to `size` bytes if shorter, preallocating the new range, and fsyncs it.
fn grow(file: &File, path: &Path, size: u64) -> io::Result<()> {
    let length = file.metadata()?.len();
    if length >= size {
        return Ok(());
    }
    let too_large = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {size} bytes is too large a file", path.display()),
        )
    };
    let start = libc::off_t::try_from(length).map_err(|_| too_large())?;
    let added = libc::off_t::try_from(size - length).map_err(|_| too_large())?;
    // SAFETY: fallocate on an open descriptor has no memory effects.
    let done = unsafe { libc::fallocate(file.as_raw_fd(), 0, start, added) };
    if done != 0 {
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::ENOSYS) => {
                eprintln!(
                    "heterarchy: warning: {}: the file system cannot preallocate ({error}); grown \
                     sparse, so a full file system shows only when written",
                    path.display()
                );
                file.set_len(size)
                    .map_err(|error| annotate(path, "cannot extend", error))?;
            }
            _ => {
                let what = format!("cannot preallocate {size} bytes for");
                return Err(annotate(path, &what, error));
            }
        }
    }
    file.sync_all()
        .map_err(|error| annotate(path, "cannot fsync", error))
}

/// Fsyncs the directory holding `path`, so that a file just created there stays named after
/// a power cut.
fn sync_parent(path: &Path) -> io::Result<()> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let directory = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(parent)
        .map_err(|error| annotate(parent, "cannot open the directory", error))?;
    match directory.sync_all() {
        // Some file systems cannot fsync a directory; there is nothing more to be had there.
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        result => result.map_err(|error| annotate(parent, "cannot fsync the directory", error)),
    }
}

/// Warns on stderr, one line naming `path`, when group or others may read or write the secret
/// it holds (a TLS key, a PSK or authentication file). Says nothing when the file cannot be
/// looked at: reading it reports that.
pub fn warn_if_exposed(path: &Path) {
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let mode = meta.mode() & 0o7777;
    if mode & 0o066 != 0 {
        eprintln!(
            "heterarchy: warning: {} is mode {mode:04o}: group or others can read or change this \
             secret; chmod 600 it",
            path.display()
        );
    }
}

/// The path `path` names as one file, for telling whether two configured paths are the same
/// file: absolute, with its longest existing ancestor (the whole path, where the file exists)
/// canonicalized, so links and `..` resolve, and the rest normalized lexically.
pub fn identity(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_or_else(|_| path.to_path_buf(), |cwd| cwd.join(path))
    };
    let mut rest = Vec::new();
    let mut existing = absolute.as_path();
    loop {
        if let Ok(canonical) = existing.canonicalize() {
            let mut identity = canonical;
            for component in rest.iter().rev() {
                push_lexically(&mut identity, *component);
            }
            return identity;
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                existing = parent;
            }
            _ => break,
        }
    }
    let mut identity = PathBuf::new();
    for component in absolute.components() {
        push_lexically(&mut identity, component);
    }
    identity
}

fn push_lexically(path: &mut PathBuf, component: Component<'_>) {
    match component {
        Component::CurDir => {}
        Component::ParentDir => {
            path.pop();
        }
        other => path.push(other),
    }
}

/// `verb PATH: error`, keeping the error's kind.
fn annotate(path: &Path, verb: &str, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{verb} {}: {error}", path.display()))
}

/// `PATH reason`: a file these rules do not open.
fn refused(path: &Path, reason: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{} {reason}", path.display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode_of(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn a_new_file_is_the_owners_alone_and_preallocated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tier");
        let opened = open_storage(&path, Some(1 << 20), 0).unwrap();
        assert!(opened.created && !opened.device);
        assert_eq!(mode_of(&path), 0o600);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), 1 << 20);
        // Preallocated, not sparse (where the file system can: both of this machine's can).
        assert!(meta.blocks() * 512 >= 1 << 20, "{} blocks", meta.blocks());
        drop(opened);
        // Opened again: not created, not shrunk.
        let again = open_storage(&path, Some(4096), 0).unwrap();
        assert!(!again.created);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 20);
    }

    #[test]
    fn a_missing_file_without_a_size_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let error = open_storage(&dir.path().join("absent"), None, 0).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        assert!(error.to_string().contains("absent"), "{error}");
    }

    #[test]
    fn a_symbolic_link_is_refused_and_its_target_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        std::fs::write(&target, b"precious").unwrap();
        let link = dir.path().join("tier");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = open_storage(&link, Some(1 << 20), 0).unwrap_err();
        assert!(
            error.to_string().contains("tier is a symbolic link"),
            "{error}"
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
        // A dangling link is refused too, never created through.
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(open_storage(&dangling, Some(4096), 0).is_err());
        assert!(!dir.path().join("nowhere").exists());
    }

    #[test]
    fn a_file_open_to_others_is_tightened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("values");
        std::fs::write(&path, [0u8; 4096]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        open_storage(&path, Some(4096), 0).unwrap();
        assert_eq!(mode_of(&path), 0o600);
    }

    #[test]
    fn another_users_file_is_refused() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: only root can give a file to another user");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("planted");
        std::fs::write(&path, [0u8; 4096]).unwrap();
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        let error = open_storage(&path, Some(4096), 0).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("planted") && text.contains("owned by uid 65534"),
            "{text}"
        );
        assert!(!text.contains('\n'));
    }

    #[test]
    fn a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let error = open_storage(dir.path(), Some(4096), 0).unwrap_err();
        assert!(error.to_string().contains("is a directory"), "{error}");
    }

    #[test]
    fn a_device_is_opened_as_it_is_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("by-id");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        let opened = open_storage(&link, Some(4096), 0).unwrap();
        assert!(opened.device && !opened.created);
    }

    #[test]
    fn identity_sees_through_links_dots_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let alias = dir.path().join("alias");
        std::os::unix::fs::symlink(&real, &alias).unwrap();
        // Neither file exists: their directories are one.
        assert_eq!(
            identity(&real.join("a.values")),
            identity(&alias.join("a.values"))
        );
        assert_eq!(identity(&real.join("x/../b")), identity(&alias.join("./b")));
        std::fs::write(real.join("c"), b"").unwrap();
        assert_eq!(identity(&real.join("c")), identity(&alias.join("c")));
        assert_ne!(identity(&real.join("c")), identity(&real.join("d")));
    }
}
