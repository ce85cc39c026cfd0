//! Certificates that can be read again while the server runs, as memcached's `refresh_certs`
//! does (docs/reliability.md, "Key-value over TLS"): the configuration new sessions start
//! with is swapped whole once the new files load; sessions already up keep theirs, and files
//! that fail to load leave the one in force.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use rustls::ServerConfig;

use super::{server_config, TlsServer, CA_CERT_FILE, SERVER_CERT_FILE, SERVER_KEY_FILE};
use crate::error::TlsError;

/// A `tls_certificates` directory's configuration, to be read again on demand.
#[derive(Debug)]
pub struct ReloadableTls {
    dir: PathBuf,
    verify_peer: bool,
    current: RwLock<TlsServer>,
    /// The files' modification times when they were last read, loaded or not.
    read_at: Mutex<Vec<Option<SystemTime>>>,
}

impl ReloadableTls {
    /// Reads the directory's files now; the error names the file.
    pub fn load(dir: &Path, verify_peer: bool) -> Result<ReloadableTls, TlsError> {
        let read_at = stamps(dir);
        let config = server_config(dir, verify_peer)?;
        Ok(ReloadableTls {
            dir: dir.to_path_buf(),
            verify_peer,
            current: RwLock::new(TlsServer::Certificates(config)),
            read_at: Mutex::new(read_at),
        })
    }

    /// What new sessions start with.
    pub fn current(&self) -> TlsServer {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The configuration new sessions start with, as rustls has it.
    pub fn config(&self) -> Arc<ServerConfig> {
        match self.current() {
            TlsServer::Certificates(config) => config,
            TlsServer::Psk(_) => unreachable!("a certificate directory makes certificate sessions"),
        }
    }

    /// Reads the files again: new sessions use them from now on if they load; else the
    /// error names the file and the configuration in force stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let read_at = stamps(&self.dir);
        *self.read_at.lock().unwrap_or_else(|p| p.into_inner()) = read_at;
        let config = server_config(&self.dir, self.verify_peer)?;
        *self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = TlsServer::Certificates(config);
        Ok(())
    }

    /// Reads the files again if one has changed since they were last read; `None` when none
    /// has. A half-written pair that fails is read again when it changes again.
    pub fn reload_if_changed(&self) -> Option<Result<(), TlsError>> {
        let now = stamps(&self.dir);
        if *self.read_at.lock().unwrap_or_else(|p| p.into_inner()) == now {
            return None;
        }
        Some(self.reload())
    }

    /// The directory it reads.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The modification times of a directory's three files (`None` for one missing).
fn stamps(dir: &Path) -> Vec<Option<SystemTime>> {
    [SERVER_CERT_FILE, SERVER_KEY_FILE, CA_CERT_FILE]
        .iter()
        .map(|name| {
            std::fs::metadata(dir.join(name))
                .and_then(|meta| meta.modified())
                .ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A self-signed certificate and key for `name` in `dir`, made by the openssl CLI; false
    /// when there is none to make them.
    fn self_signed(dir: &Path, name: &str) -> bool {
        Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-days", "1", "-subj", &format!("/CN={name}")])
            .arg("-keyout")
            .arg(dir.join(SERVER_KEY_FILE))
            .arg("-out")
            .arg(dir.join(SERVER_CERT_FILE))
            .output()
            .is_ok_and(|done| done.status.success())
    }

    #[test]
    fn new_files_are_read_again_and_bad_ones_leave_the_old_in_force() {
        let dir = tempfile::tempdir().unwrap();
        if !self_signed(dir.path(), "first") {
            eprintln!("skipped: the openssl CLI is not installed");
            return;
        }
        let tls = ReloadableTls::load(dir.path(), false).unwrap();
        let first = tls.config();
        assert!(tls.reload_if_changed().is_none());
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(self_signed(dir.path(), "second"));
        assert!(matches!(tls.reload_if_changed(), Some(Ok(()))));
        let second = tls.config();
        assert!(!Arc::ptr_eq(&first, &second));
        assert!(tls.reload_if_changed().is_none());
        std::fs::write(dir.path().join(SERVER_CERT_FILE), "not PEM\n").unwrap();
        let error = tls.reload_if_changed().unwrap().unwrap_err().to_string();
        assert!(error.contains("server-cert.pem"), "{error}");
        assert!(Arc::ptr_eq(&second, &tls.config()));
        // Until it changes again, a broken pair is not read over and over.
        assert!(tls.reload_if_changed().is_none());
        assert!(tls.reload().is_err());
    }
}
