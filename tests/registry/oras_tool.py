"""Registry chores for the tests, done by tools no one here wrote: oras-py
(pinned in tests/setup.sh) pushes and pulls artifacts, requests PUTs a
hand-written manifest, bcrypt writes an htpasswd line, pyca/cryptography
makes P-256 keys.

Usage (stdout is the one answer; errors exit non-zero):
  oras_tool.py push HOST:PORT REPO:TAG FILE MEDIA CONFIG CONFIG_MEDIA [USER PASS]
      -> the manifest digest
  oras_tool.py put-manifest HOST:PORT REPO REF MANIFEST.json [USER PASS]
      -> the manifest digest
  oras_tool.py pull HOST:PORT REPO:TAG OUTDIR [USER PASS]
      -> the pulled file paths, one per line
  oras_tool.py get-manifest HOST:PORT REPO REF OUT [USER PASS]
      -> writes the manifest's bytes to OUT
  oras_tool.py htpasswd USER PASS       -> an htpasswd line (bcrypt)
  oras_tool.py key OUT.pem PUB.pem      -> writes a P-256 private and public key
"""
import hashlib
import sys

import requests


def client(host, user=None, password=None):
    import oras.client

    backend = "basic" if user else "token"
    c = oras.client.OrasClient(hostname=host, insecure=True, auth_backend=backend)
    if user:
        c.auth.set_basic_auth(user, password)
    return c


def head_digest(host, repo, ref, auth):
    r = requests.get(
        f"http://{host}/v2/{repo}/manifests/{ref}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        auth=auth,
        timeout=30,
    )
    r.raise_for_status()
    return "sha256:" + hashlib.sha256(r.content).hexdigest()


def main(argv):
    cmd = argv[1]
    if cmd == "push":
        host, target, f, media, cfg, cfg_media = argv[2:8]
        user, password = (argv[8], argv[9]) if len(argv) > 9 else (None, None)
        c = client(host, user, password)
        r = c.push(
            target=f"{host}/{target}",
            files=[f"{f}:{media}"],
            manifest_config=f"{cfg}:{cfg_media}",
            disable_path_validation=True,
            quiet=True,
        )
        r.raise_for_status()
        repo, tag = target.rsplit(":", 1)
        print(head_digest(host, repo, tag, (user, password) if user else None))
    elif cmd == "put-manifest":
        host, repo, ref, path = argv[2:6]
        auth = (argv[6], argv[7]) if len(argv) > 7 else None
        body = open(path, "rb").read()
        r = requests.put(
            f"http://{host}/v2/{repo}/manifests/{ref}",
            data=body,
            headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
            auth=auth,
            timeout=30,
        )
        r.raise_for_status()
        print("sha256:" + hashlib.sha256(body).hexdigest())
    elif cmd == "pull":
        host, target, outdir = argv[2:5]
        user, password = (argv[5], argv[6]) if len(argv) > 6 else (None, None)
        for p in client(host, user, password).pull(target=f"{host}/{target}", outdir=outdir):
            print(p)
    elif cmd == "get-manifest":
        host, repo, ref, out = argv[2:6]
        auth = (argv[6], argv[7]) if len(argv) > 7 else None
        r = requests.get(
            f"http://{host}/v2/{repo}/manifests/{ref}",
            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
            auth=auth,
            timeout=30,
        )
        r.raise_for_status()
        open(out, "wb").write(r.content)
    elif cmd == "htpasswd":
        import bcrypt

        user, password = argv[2:4]
        print(f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()}")
    elif cmd == "key":
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        k = ec.generate_private_key(ec.SECP256R1())
        open(argv[2], "wb").write(
            k.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        open(argv[3], "wb").write(
            k.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
