"""Independent VC-JWT verifier for the conformance tests: joserfc (PyPI), which shares nothing with
the service's hand-assembled JWS. Installed at test-install time into a cached venv by
hack/ensure-verifiers.sh.

Usage: vc_verify.py <public key PEM file> <token>
Verifies the JWS (ES256 or EdDSA; the key must be the one the `kid` names), the registered claims
(exp, nbf, iat at the current time) and the VC Data Model 2.0 shape: @context starting with the v2
context, type containing VerifiableCredential, an issuer URL, validFrom/validUntil as XML Schema
dateTimeStamps with the current time inside them, a credentialSubject, and `iss`/`jti`/`sub`
equal to issuer.id/id/credentialSubject.id. Prints `OK <kid>` and exits 0, or `FAIL <reason>` and 1.
"""
import datetime
import hashlib
import re
import sys

from joserfc import jws, jwt
from joserfc.jwk import ECKey, OKPKey
from joserfc.errors import JoseError

V2 = "https://www.w3.org/ns/credentials/v2"
DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def fail(reason):
    print(f"FAIL {reason}")
    sys.exit(1)


def main():
    if len(sys.argv) != 3:
        print("FAIL usage: vc_verify.py <public key PEM> <token>")
        sys.exit(2)
    pem = open(sys.argv[1], "rb").read()
    token = sys.argv[2]
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    public = serialization.load_pem_public_key(pem)
    key = OKPKey.import_key(pem) if isinstance(public, Ed25519PublicKey) else ECKey.import_key(pem)
    try:
        header = jws.extract_compact(token.encode()).protected
    except Exception as e:  # noqa: BLE001
        fail(f"not a compact JWS: {e}")
    if header.get("typ") != "vc+jwt":
        fail(f"typ is {header.get('typ')}")
    # kid is the key id: sha256 of the DER SubjectPublicKeyInfo.
    spki = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if header.get("kid") != "sha256:" + hashlib.sha256(spki).hexdigest():
        fail(f"kid {header.get('kid')} is not this key's id")
    try:
        decoded = jwt.decode(token, key, algorithms=["ES256", "EdDSA"])
        jwt.JWTClaimsRegistry(
            exp={"essential": True}, nbf={"essential": True}, iat={"essential": True}
        ).validate(decoded.claims)
    except JoseError as e:
        fail(f"{type(e).__name__}: {e}")
    c = decoded.claims
    ctx = c.get("@context")
    if not isinstance(ctx, list) or not ctx or ctx[0] != V2:
        fail("@context does not start with the VC 2.0 context")
    if "VerifiableCredential" not in (c.get("type") or []):
        fail("type lacks VerifiableCredential")
    issuer = c.get("issuer")
    issuer_id = issuer.get("id") if isinstance(issuer, dict) else issuer
    if not isinstance(issuer_id, str) or not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", issuer_id):
        fail("issuer is not a URL")
    now = datetime.datetime.now(datetime.timezone.utc)
    times = {}
    for f in ("validFrom", "validUntil"):
        v = c.get(f)
        if not isinstance(v, str) or not DATETIME.match(v):
            fail(f"{f} is not a dateTimeStamp")
        times[f] = datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
    if not times["validFrom"] <= now <= times["validUntil"]:
        fail("outside validFrom..validUntil")
    subject = c.get("credentialSubject")
    if not isinstance(subject, dict):
        fail("credentialSubject missing")
    if c.get("iss") != issuer_id or c.get("jti") != c.get("id") or c.get("sub") != subject.get("id"):
        fail("iss/jti/sub differ from issuer.id/id/credentialSubject.id")
    # Attenuation, as docs/capabilities.md defines it: each delegation's scope within the one before
    # (`*` covers everything; otherwise the earlier scope's segments are a prefix of the later's),
    # and the subject's scope is the last delegation's.
    delegations = subject.get("delegations")
    if not isinstance(delegations, list) or not delegations:
        fail("credentialSubject.delegations missing")
    for before, after in zip(delegations, delegations[1:]):
        outer, inner = before.get("scope"), after.get("scope")
        if not (outer == "*" or inner.split(":")[: len(outer.split(":"))] == outer.split(":")):
            fail(f"delegation widens {outer} to {inner}")
    if subject.get("scope") != delegations[-1].get("scope"):
        fail("credentialSubject.scope is not the last delegation's")
    print(f"OK {header.get('kid')}")


main()
