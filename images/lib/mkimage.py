#!/usr/bin/env python3
"""Write an OCI image into an OCI image layout, deterministically.

Usage: mkimage.py [OPTION VALUE]... LAYOUT REF ENTRYPOINT_JSON LAYER_DIR...

Options (each optional; without them the config holds only Entrypoint and the default
PATH, as for the etcd and Kubernetes component images):
  --cmd JSON            the image's Cmd (a JSON list)
  --env NAME=VALUE      sets one variable (repeatable); PATH replaces the default PATH
  --workdir DIR         the image's WorkingDir
  --user USER           the image's User
  --label KEY=VALUE     one label (repeatable)
ENTRYPOINT_JSON may be `null`: the image then has no Entrypoint, and Cmd is the command
(as in images whose upstream Dockerfile sets only CMD).

Each LAYER_DIR becomes one gzip-compressed tar layer: entries sorted by name, owner
0:0, every mtime SOURCE_DATE_EPOCH, gzip header without name or time. The same
directory contents therefore give the same layer digest in every image, which is
how the etcd and busybox images share their base layer. LAYOUT is created or
extended: its index.json gets one entry named REF (org.opencontainers.image.ref.name).
"""
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "1700000000"))
ARCH = os.environ.get("SPROUT_IMAGE_ARCH") or {"x86_64": "amd64", "aarch64": "arm64"}.get(
    os.uname().machine, os.uname().machine)


def put_blob(layout, data):
    digest = hashlib.sha256(data).hexdigest()
    path = os.path.join(layout, "blobs", "sha256", digest)
    if not os.path.exists(path):
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, path)
    return "sha256:" + digest, len(data)


def layer_tar(root):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = []
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                paths.append(os.path.relpath(os.path.join(dirpath, name), root))
        for rel in sorted(paths):
            full = os.path.join(root, rel)
            info = tar.gettarinfo(full, arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = EPOCH
            info.pax_headers = {}
            if info.isreg():
                with open(full, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return buf.getvalue()


def options(argv):
    """Splits the leading --option VALUE pairs from the positional arguments."""
    opts = {"env": [], "labels": {}}
    args = list(argv)
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if not args:
            sys.exit("mkimage.py: %s needs a value" % opt)
        val = args.pop(0)
        if opt == "--cmd":
            opts["Cmd"] = json.loads(val)
        elif opt == "--env" and "=" in val:
            opts["env"].append(val)
        elif opt == "--workdir":
            opts["WorkingDir"] = val
        elif opt == "--user":
            opts["User"] = val
        elif opt == "--label" and "=" in val:
            key, value = val.split("=", 1)
            opts["labels"][key] = value
        else:
            sys.exit("mkimage.py: unknown option or value: %s %s\n\n%s" % (opt, val, __doc__))
    return opts, args


def main():
    opts, args = options(sys.argv[1:])
    if len(args) < 4:
        sys.exit(__doc__)
    layout, ref, entrypoint = args[0], args[1], json.loads(args[2])
    os.makedirs(os.path.join(layout, "blobs", "sha256"), exist_ok=True)
    layers, diff_ids = [], []
    for root in args[3:]:
        raw = layer_tar(root)
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        gz = io.BytesIO()
        with gzip.GzipFile(fileobj=gz, mode="wb", compresslevel=6, mtime=0, filename="") as g:
            g.write(raw)
        digest, size = put_blob(layout, gz.getvalue())
        layers.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest, "size": size})
    created = __import__("time").strftime("%Y-%m-%dT%H:%M:%SZ", __import__("time").gmtime(EPOCH))
    # A variable given with --env replaces the default of that name in place, so the
    # config of an image without options is byte for byte what it was before them.
    env = ["PATH=/usr/local/bin:/usr/bin:/bin"]
    for var in opts["env"]:
        name = var.split("=", 1)[0]
        if any(e.split("=", 1)[0] == name for e in env):
            env = [var if e.split("=", 1)[0] == name else e for e in env]
        else:
            env.append(var)
    image_config = {"Env": env}
    if entrypoint is not None:
        image_config["Entrypoint"] = entrypoint
    for key in ("Cmd", "WorkingDir", "User"):
        if key in opts:
            image_config[key] = opts[key]
    if opts["labels"]:
        image_config["Labels"] = opts["labels"]
    config = {
        "created": created,
        "architecture": ARCH,
        "os": "linux",
        "config": image_config,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    cdigest, csize = put_blob(layout, json.dumps(config, sort_keys=True, separators=(",", ":")).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdigest, "size": csize},
        "layers": layers,
    }
    mdigest, msize = put_blob(layout, json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())
    index_path = os.path.join(layout, "index.json")
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
    index["manifests"] = [m for m in index["manifests"]
                          if m.get("annotations", {}).get("org.opencontainers.image.ref.name") != ref]
    index["manifests"].append({
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": mdigest, "size": msize,
        "platform": {"os": "linux", "architecture": ARCH},
        "annotations": {"org.opencontainers.image.ref.name": ref},
    })
    with open(os.path.join(layout, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion":"1.0.0"}')
    with open(index_path + ".tmp", "w") as f:
        json.dump(index, f, indent=2)
    os.rename(index_path + ".tmp", index_path)
    print(ref, mdigest)


main()
