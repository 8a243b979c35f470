//! The http handler's client and how it checks certificates, from the
//! executor's `http_*` keys.
//!
//! `https://` goes through rustls. A server's certificate must chain to
//! one of the Mozilla roots compiled into the binary (webpki-roots) or to
//! a CA of `executor.http_ca_file`. The roots are compiled in, not read
//! from the host's store: a slim container image has no store at all (no
//! `ca-certificates` package), and the same binary then trusts the same
//! CAs everywhere. An internal CA installed into the host's store is not
//! trusted for that reason; its PEM goes in `executor.http_ca_file`.
//! `executor.http_insecure` turns the checks off altogether.

use rondo_core::config::ExecutorConfig;
use rondo_core::destination::Destinations;
use rondo_core::error::chain;
use rondo_core::outbound;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The keys, as errors and logs name them.
pub(crate) const CA_FILE_KEY: &str = "executor.http_ca_file";
pub(crate) const INSECURE_KEY: &str = "executor.http_insecure";
pub(crate) const MAX_RESPONSE_KEY: &str = "executor.http_max_response_bytes";
pub(crate) const ALLOW_KEY: &str = "executor.http_allow";

/// The executor's `http_*` keys, checked, with the CA file read.
#[derive(Debug)]
pub(crate) struct Settings {
    /// The certificates of `http_ca_file`, each usable as a trust anchor.
    extra_roots: Vec<CertificateDer<'static>>,
    pub(crate) insecure: bool,
    pub(crate) max_response_bytes: u64,
    /// Where a run may go beyond public addresses.
    pub(crate) allow: Destinations,
}

impl Settings {
    /// Checks the keys and reads the CA file; the error names the key.
    pub(crate) fn from_config(config: &ExecutorConfig) -> Result<Settings, String> {
        if config.http_max_response_bytes == 0 {
            return Err(format!("{MAX_RESPONSE_KEY} must be at least 1"));
        }
        // Both set is a config that says two things: an operator who
        // added a CA expects it to be checked against.
        if config.http_insecure && !config.http_ca_file.is_empty() {
            return Err(format!(
                "{INSECURE_KEY} turns certificate checks off, so {CA_FILE_KEY} would be ignored: set one of them"
            ));
        }
        let extra_roots = match config.http_ca_file.as_str() {
            "" => Vec::new(),
            path => read_ca_file(path)?,
        };
        let allow = Destinations::parse(ALLOW_KEY, &config.http_allow)
            .map_err(|e| format!("{ALLOW_KEY}: {}", e.message))?;
        Ok(Settings {
            extra_roots,
            insecure: config.http_insecure,
            max_response_bytes: config.http_max_response_bytes,
            allow,
        })
    }

    /// A client for every run of one executor (its connection pool is
    /// shared): the bundled roots plus the CA file, or no checks; only to
    /// the destinations [`Settings::allow`] permits.
    pub(crate) fn client(&self) -> Result<reqwest::Client, String> {
        let builder = reqwest::Client::builder()
            .user_agent(concat!("rondo-executor/", env!("CARGO_PKG_VERSION")))
            .danger_accept_invalid_certs(self.insecure);
        let mut builder = outbound::guard(builder, self.allow.clone());
        for der in &self.extra_roots {
            let cert = reqwest::Certificate::from_der(der)
                .map_err(|e| format!("{CA_FILE_KEY}: {}", chain(&e)))?;
            builder = builder.add_root_certificate(cert);
        }
        builder
            .build()
            .map_err(|e| format!("http: cannot build a client: {}", chain(&e)))
    }
}

/// The certificates of a PEM file, each checked as a trust anchor now, so
/// a bad file stops the executor's start rather than its first https run.
fn read_ca_file(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{CA_FILE_KEY}: cannot read {path}: {e}"))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{CA_FILE_KEY}: {path} is not valid PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "{CA_FILE_KEY}: {path} holds no certificate (no -----BEGIN CERTIFICATE----- block)"
        ));
    }
    let mut roots = rustls::RootCertStore::empty();
    for (index, cert) in certs.iter().enumerate() {
        roots.add(cert.clone()).map_err(|e| {
            format!(
                "{CA_FILE_KEY}: certificate {} of {path} cannot be a trust anchor: {e}",
                index + 1
            )
        })?;
    }
    Ok(certs)
}

/// Why rustls refused the server's certificate, when that is why a
/// request failed. rustls' error sits inside `io::Error`s (one in
/// another), whose `source()` skips what they wrap, so each is opened.
pub(crate) fn refused_certificate<'e>(
    e: &'e (dyn std::error::Error + 'static),
) -> Option<&'e rustls::CertificateError> {
    let mut next = Some(e);
    while let Some(error) = next {
        if let Some(rustls::Error::InvalidCertificate(why)) = error.downcast_ref::<rustls::Error>()
        {
            return Some(why);
        }
        next = match error.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => error.source(),
        };
    }
    None
}
