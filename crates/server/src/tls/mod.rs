//! TLS for the NBD server (proto.md "TLS support"; docs/reliability.md, "TLS and
//! authentication"): the `[server]` settings as nbdkit's `--tls`, `--tls-certificates`,
//! `--tls-verify-peer` and `--tls-psk` take them, the [`TlsServer`] they make, and a
//! non-blocking TLS stream for the event loops ([`stream`]). The key-value tenants' TLS
//! (docs/reliability.md, "Key-value over TLS") reads the same directory layout, and can read
//! it again while serving ([`reload`]).
//!
//! Certificates sit in one directory laid out as nbdkit's and qemu's: `server-cert.pem` (the
//! chain, the server's first), `server-key.pem`, and `ca-cert.pem`, the authority that signs
//! clients' certificates, needed only to verify them. The cryptography is rustls's `ring`
//! provider, given to each configuration (no process-wide default is installed).
//!
//! TLS with pre-shared keys (nbdkit's `--tls-psk`, a file of `username:hexkey` lines) runs on
//! OpenSSL ([`psk`]): rustls implements no external PSKs (rustls/rustls#174, open since 2018),
//! and hand-made key schedules are no place for a cache server. A server offers one or the
//! other, as nbdkit does.

pub mod psk;
pub mod reload;
pub mod stream;

use std::path::Path;
use std::sync::Arc;

use heterarchy_nbd::TlsMode;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

pub use psk::PskServer;
pub use reload::ReloadableTls;
pub use stream::Transport;

use crate::error::{ConfigError, TlsError};

/// The server's certificate chain, in a `tls_certificates` directory.
pub const SERVER_CERT_FILE: &str = "server-cert.pem";
/// The server's private key, in a `tls_certificates` directory.
pub const SERVER_KEY_FILE: &str = "server-key.pem";
/// The authority that signs client certificates, in a `tls_certificates` directory.
pub const CA_CERT_FILE: &str = "ca-cert.pem";

/// The TLS settings of a server, as the config's `[server]` keys name them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsSettings<'a> {
    /// `tls`: how TLS is offered.
    pub mode: TlsMode,
    /// `tls_certificates`: the directory of PEM files.
    pub certificates: Option<&'a Path>,
    /// `tls_psk`: a file of `username:hexkey` lines, instead of certificates.
    pub psk: Option<&'a Path>,
    /// `tls_verify_peer`: clients must present a certificate `ca-cert.pem` signed.
    pub verify_peer: bool,
}

impl TlsSettings<'_> {
    /// Checks that the settings make sense together, without reading any file; the error
    /// starts with the key.
    pub fn check(&self) -> Result<(), ConfigError> {
        let expected_on = "expected tls = \"on\" or \"require\"";
        if let Some(psk) = self.psk {
            let refused = |reason: String| Err(ConfigError::invalid("tls_psk", reason));
            if self.mode == TlsMode::Off {
                return refused(format!(
                    "{} given with tls = \"off\"; {expected_on}",
                    psk.display()
                ));
            }
            if self.certificates.is_some() {
                return refused(format!(
                    "{} given with tls_certificates; expected one of them",
                    psk.display()
                ));
            }
            if self.verify_peer {
                return refused(format!(
                    "{} given with tls_verify_peer, which needs certificates; expected one of them",
                    psk.display()
                ));
            }
            return Ok(());
        }
        match (self.mode, self.certificates) {
            (TlsMode::Off, Some(dir)) => Err(ConfigError::invalid(
                "tls_certificates",
                format!("{} given with tls = \"off\"; {expected_on}", dir.display()),
            )),
            (TlsMode::Off, None) if self.verify_peer => Err(ConfigError::invalid(
                "tls_verify_peer",
                format!("given with tls = \"off\"; {expected_on}"),
            )),
            (TlsMode::On | TlsMode::Require, None) => Err(ConfigError::invalid(
                "tls",
                format!(
                    "\"{}\" without tls_certificates or tls_psk; expected the directory of \
                     {SERVER_CERT_FILE} and {SERVER_KEY_FILE}, or a file of username:hexkey lines",
                    self.mode.name()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// What TLS these settings make, `None` with TLS off; the error names the key and the file.
    pub fn server(&self) -> Result<Option<TlsServer>, ConfigError> {
        self.check()?;
        if self.mode == TlsMode::Off {
            return Ok(None);
        }
        if let Some(psk) = self.psk {
            return PskServer::from_file(psk)
                .map(|server| Some(TlsServer::Psk(server)))
                .map_err(|e| ConfigError::within("tls_psk: ", e));
        }
        match self.certificates {
            None => Ok(None),
            Some(dir) => server_config(dir, self.verify_peer)
                .map(|config| Some(TlsServer::Certificates(config)))
                .map_err(|e| ConfigError::within("tls_certificates: ", e)),
        }
    }
}

/// How a server's TLS sessions are made: with X.509 certificates (rustls) or with pre-shared
/// keys (OpenSSL).
#[derive(Clone, Debug)]
pub enum TlsServer {
    /// The rustls configuration of `tls_certificates`.
    Certificates(Arc<ServerConfig>),
    /// The keys of `tls_psk`.
    Psk(PskServer),
}

/// A server configuration from the PEM files in `dir`; with `verify_peer`, clients must
/// present a certificate that `ca-cert.pem` signed. The error names the file.
pub fn server_config(dir: &Path, verify_peer: bool) -> Result<Arc<ServerConfig>, TlsError> {
    let failed = |subject: String, reason: String| TlsError { subject, reason };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cert_path = dir.join(SERVER_CERT_FILE);
    let chain = certificates(&cert_path)?;
    let key_path = dir.join(SERVER_KEY_FILE);
    heterarchy_device::secure_file::warn_if_exposed(&key_path);
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| {
        failed(
            key_path.display().to_string(),
            format!(
                "{}; expected a PEM private key (PKCS #8, PKCS #1 or SEC1)",
                pem_error(&e)
            ),
        )
    })?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| failed("the TLS provider".to_string(), e.to_string()))?;
    let builder = if verify_peer {
        let ca_path = dir.join(CA_CERT_FILE);
        let mut roots = RootCertStore::empty();
        for certificate in certificates(&ca_path)? {
            roots
                .add(certificate)
                .map_err(|e| failed(ca_path.display().to_string(), e.to_string()))?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| failed(ca_path.display().to_string(), e.to_string()))?;
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = builder.with_single_cert(chain, key).map_err(|e| {
        let subject = format!("{} and {}", cert_path.display(), key_path.display());
        failed(subject, e.to_string())
    })?;
    Ok(Arc::new(config))
}

/// Every certificate in the PEM file at `path`, at least one.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let failed = |e: rustls::pki_types::pem::Error| TlsError {
        subject: path.display().to_string(),
        reason: format!("{}; expected PEM certificates", pem_error(&e)),
    };
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(failed)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed)?;
    if chain.is_empty() {
        return Err(TlsError {
            subject: path.display().to_string(),
            reason: "no CERTIFICATE section; expected PEM certificates".to_string(),
        });
    }
    Ok(chain)
}

/// A PEM error on one line.
fn pem_error(error: &rustls::pki_types::pem::Error) -> String {
    match error {
        rustls::pki_types::pem::Error::Io(error) => format!("cannot read: {error}"),
        rustls::pki_types::pem::Error::NoItemsFound => "no such PEM section".to_string(),
        other => format!("{other:?}").replace('\n', " "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_cannot_work_are_refused_by_key() {
        let dir = Path::new("/etc/pki/nbd");
        let psk = Path::new("/etc/nbd.psk");
        for (settings, key) in [
            (
                TlsSettings {
                    mode: TlsMode::Require,
                    ..TlsSettings::default()
                },
                "tls:",
            ),
            (
                TlsSettings {
                    certificates: Some(dir),
                    ..TlsSettings::default()
                },
                "tls_certificates:",
            ),
            (
                TlsSettings {
                    verify_peer: true,
                    ..TlsSettings::default()
                },
                "tls_verify_peer:",
            ),
            (
                TlsSettings {
                    psk: Some(psk),
                    ..TlsSettings::default()
                },
                "tls_psk:",
            ),
            (
                TlsSettings {
                    mode: TlsMode::On,
                    certificates: Some(dir),
                    psk: Some(psk),
                    ..TlsSettings::default()
                },
                "tls_psk:",
            ),
            (
                TlsSettings {
                    mode: TlsMode::Require,
                    psk: Some(psk),
                    verify_peer: true,
                    ..TlsSettings::default()
                },
                "tls_psk:",
            ),
        ] {
            let error = settings.check().unwrap_err().to_string();
            assert!(error.starts_with(key), "{error}");
            assert!(!error.contains('\n'), "{error}");
        }
        let on = TlsSettings {
            mode: TlsMode::On,
            certificates: Some(dir),
            ..TlsSettings::default()
        };
        assert!(on.check().is_ok());
        let with_keys = TlsSettings {
            mode: TlsMode::Require,
            psk: Some(psk),
            ..TlsSettings::default()
        };
        assert!(with_keys.check().is_ok());
        let missing = with_keys.server().unwrap_err().to_string();
        assert!(
            missing.starts_with("tls_psk: /etc/nbd.psk: cannot read"),
            "{missing}"
        );
        assert!(matches!(TlsSettings::default().server(), Ok(None)));
    }

    #[test]
    fn missing_or_bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let error = server_config(dir.path(), false).unwrap_err().to_string();
        assert!(error.contains("server-cert.pem: cannot read"), "{error}");
        std::fs::write(dir.path().join(SERVER_CERT_FILE), "not PEM at all\n").unwrap();
        let error = server_config(dir.path(), false).unwrap_err().to_string();
        assert!(error.contains("server-cert.pem: no CERTIFICATE"), "{error}");
    }
}
