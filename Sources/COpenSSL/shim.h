// OpenSSL 3: TLS (libssl) and EVP/ECDSA/PKCS#12 (libcrypto).
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/bio.h>
#include <openssl/rand.h>
#include <openssl/bn.h>
#include <openssl/hmac.h>

// OpenSSL's function-like macros over *_ctrl, which Swift cannot import, as named functions: the
// Swift code calls what the OpenSSL documentation names, not SSL_CTX_ctrl with a command number.

// SSL_CTX_set_min_proto_version: 1 on success.
static inline int apns_SSL_CTX_set_min_proto_version(SSL_CTX *context, int version) {
    return (int)SSL_CTX_set_min_proto_version(context, version);
}

// SSL_CTX_add1_chain_cert: adds a certificate to the chain sent with the client certificate, taking
// its own reference ("add1"). 1 on success.
static inline int apns_SSL_CTX_add1_chain_cert(SSL_CTX *context, X509 *certificate) {
    return (int)SSL_CTX_add1_chain_cert(context, certificate);
}

// SSL_set_tlsext_host_name: the SNI host name. 1 on success.
static inline int apns_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

// BIO_set_mem_eof_return: what reading an empty memory BIO returns (-1: "retry later", not EOF).
static inline void apns_BIO_set_mem_eof_return(BIO *bio, int value) {
    (void)BIO_set_mem_eof_return(bio, value);
}
