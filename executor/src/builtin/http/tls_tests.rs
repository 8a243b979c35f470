//! The http handler against a real https server on a loopback port: a CA
//! and a server certificate made for each test with rcgen, served by
//! tokio-rustls; and the checks of the `executor.http_*` keys.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rondo_core::Config;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use super::tests::{BIG_BYTES, allowing_loopback, local, serve};
use super::*;
use crate::testing::run_handler;

/// A CA no one trusts by default, and an https server on `127.0.0.1`
/// whose certificate it signed.
struct Site {
    addr: SocketAddr,
    ca_pem: String,
}

impl Site {
    async fn start() -> Site {
        let (ca_pem, config) = certificates();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that refuses the certificate ends the
                    // handshake: nothing to serve then.
                    if let Ok(tls) = acceptor.accept(stream).await {
                        serve(tls).await;
                    }
                });
            }
        });
        Site { addr, ca_pem }
    }

    fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }
}

/// The CA's PEM and a server config with a certificate for `127.0.0.1`
/// that the CA signed.
fn certificates() -> (String, ServerConfig) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "rondo test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let mut server_params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate().unwrap();
    let server_cert = server_params.signed_by(&server_key, &ca).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![server_cert.der().clone()], key)
        .unwrap();
    (ca.pem(), config)
}

/// A file in the temp dir, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(contents: &str) -> TempFile {
        let name = format!(
            "rondo-http-{}-{:x}.pem",
            std::process::id(),
            rand::random::<u64>()
        );
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, contents).unwrap();
        TempFile(path)
    }

    fn path(&self) -> String {
        self.0.to_string_lossy().into_owned()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn config(http_ca_file: &str, http_insecure: bool) -> ExecutorConfig {
    ExecutorConfig {
        http_ca_file: http_ca_file.to_owned(),
        http_insecure,
        ..allowing_loopback()
    }
}

#[tokio::test]
async fn by_default_a_certificate_of_an_unknown_ca_is_refused() {
    let site = Site::start().await;
    let (outcome, lines) = run_handler(local(), site.url("/ok")).await;
    assert_eq!((outcome.code, outcome.retryable), (500, true));
    assert!(
        outcome
            .msg
            .starts_with("http: certificate verification failed: "),
        "{}",
        outcome.msg
    );
    assert!(outcome.msg.contains("UnknownIssuer"), "{}", outcome.msg);
    assert!(
        outcome
            .msg
            .ends_with("if the server's CA is an internal one, add it to executor.http_ca_file"),
        "{}",
        outcome.msg
    );
    assert_eq!(lines, [format!("http: GET {}", site.url("/ok"))]);
}

#[tokio::test]
async fn a_ca_in_http_ca_file_is_trusted() {
    let site = Site::start().await;
    let ca_file = TempFile::new(&site.ca_pem);
    let handler = Http::from_config(&config(&ca_file.path(), false)).unwrap();
    let (outcome, lines) = run_handler(handler, site.url("/ok")).await;
    assert!(outcome.is_success(), "{outcome:?}");
    assert!(lines[1].starts_with("http: 200 OK in "), "{lines:?}");
    assert_eq!(lines[2], "http: body: hello rondo");
}

#[tokio::test]
async fn a_trusted_ca_does_not_excuse_another_host_name() {
    let site = Site::start().await;
    let ca_file = TempFile::new(&site.ca_pem);
    let handler = Http::from_config(&config(&ca_file.path(), false)).unwrap();
    let url = format!("https://localhost:{}/ok", site.addr.port());
    let (outcome, _) = run_handler(handler, url).await;
    assert!(
        outcome
            .msg
            .starts_with("http: certificate verification failed: "),
        "{}",
        outcome.msg
    );
    assert!(
        outcome
            .msg
            .ends_with(r#"certificate not valid for name "localhost"; certificate is only valid for IpAddress(127.0.0.1)"#),
        "{}",
        outcome.msg
    );
}

#[tokio::test]
async fn http_insecure_accepts_any_certificate() {
    let site = Site::start().await;
    let handler = Http::from_config(&config("", true)).unwrap();
    let (outcome, lines) = run_handler(handler, site.url("/ok")).await;
    assert!(outcome.is_success(), "{outcome:?}");
    assert_eq!(lines[2], "http: body: hello rondo");
}

#[tokio::test]
async fn an_https_body_past_the_cap_fails_the_run_naming_the_key() {
    let site = Site::start().await;
    let cap = u64::try_from(BIG_BYTES - 1).unwrap();
    let expected =
        format!("aborted: http: response exceeded {cap} bytes (executor.http_max_response_bytes)");
    for path in ["/big", "/chunked"] {
        let config = ExecutorConfig {
            http_insecure: true,
            http_max_response_bytes: cap,
            ..allowing_loopback()
        };
        let handler = Http::from_config(&config).unwrap();
        let (outcome, _) = run_handler(handler, site.url(path)).await;
        assert_eq!(
            (&outcome.msg, outcome.retryable),
            (&expected, false),
            "{path}"
        );
    }
}

#[test]
fn the_http_keys_load_from_the_file_and_the_environment() {
    let defaults = Config::load("", Vec::new()).unwrap().executor;
    assert_eq!(
        (
            defaults.http_ca_file.as_str(),
            defaults.http_insecure,
            defaults.http_max_response_bytes
        ),
        ("", false, 1024 * 1024)
    );
    let text = "[executor]\nhttp_ca_file = \"/etc/rondo/ca.pem\"\nhttp_max_response_bytes = 2048\n";
    let env = [
        ("RONDO_EXECUTOR_HTTP_INSECURE", "true"),
        ("RONDO_EXECUTOR_HTTP_MAX_RESPONSE_BYTES", "4096"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let loaded = Config::load(text, env).unwrap().executor;
    assert_eq!(
        (
            loaded.http_ca_file.as_str(),
            loaded.http_insecure,
            loaded.http_max_response_bytes
        ),
        ("/etc/rondo/ca.pem", true, 4096)
    );
    let not_a_bool = [("RONDO_EXECUTOR_HTTP_INSECURE".to_owned(), "yes".to_owned())];
    assert!(Config::load("", not_a_bool).is_err());
}

#[test]
fn unusable_http_keys_stop_the_start_naming_the_key() {
    let no_cert = TempFile::new("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    let not_base64 = TempFile::new("-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n");
    let not_a_cert =
        TempFile::new("-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n");
    let missing = std::env::temp_dir().join("rondo-http-no-such-file.pem");
    let cases = [
        (
            config(&missing.to_string_lossy(), false),
            "executor.http_ca_file: cannot read",
        ),
        (config(&no_cert.path(), false), "holds no certificate"),
        (config(&not_base64.path(), false), "is not valid PEM"),
        (
            config(&not_a_cert.path(), false),
            "cannot be a trust anchor",
        ),
        (
            config("/x.pem", true),
            "executor.http_insecure turns certificate checks off",
        ),
        (
            ExecutorConfig {
                http_max_response_bytes: 0,
                ..ExecutorConfig::default()
            },
            "executor.http_max_response_bytes must be at least 1",
        ),
        (
            ExecutorConfig {
                http_allow: vec!["metadata.internal".into()],
                ..ExecutorConfig::default()
            },
            "executor.http_allow: \"metadata.internal\" is not an address",
        ),
    ];
    for (executor, expected) in cases {
        let Err(ExecutorError::Config(message)) = Http::from_config(&executor) else {
            panic!("{executor:?} was accepted");
        };
        assert!(message.starts_with("executor.http_"), "{message}");
        assert!(message.contains(expected), "{message}");
        let mut whole = Config::load("", Vec::new()).unwrap();
        whole.executor = executor;
        // What the rondo-executor binary checks before it builds.
        assert_eq!(
            super::check_config(&whole.executor).err(),
            Some(ExecutorError::Config(message))
        );
    }
}
