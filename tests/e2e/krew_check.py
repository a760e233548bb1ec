#!/usr/bin/env python3
"""krew_check.py MANIFEST [ARCHIVE] — check a krew plugin manifest the way
krew's own validation does (internal/index/validation: ValidatePlugin,
validatePlatform, validateFiles, validateSelector), after a strict YAML
parse. With ARCHIVE: exactly one platform's uri names the archive, its sha256
is the archive's and its bin is a file in it. Prints one line per problem
and exits 1, or prints "ok" and exits 0. Used by tests/e2e/test_client.sh.
"""
import hashlib
import os
import re
import sys
import tarfile

import yaml

SEMVER = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                    r"(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$")
SHA256 = re.compile(r"^[a-f0-9]{64}$")
NAME = re.compile(r"^[\w-]+$")


def check(path, archive=None):
    errs = []
    with open(path, encoding="utf-8") as f:
        docs = list(yaml.safe_load_all(f))
    if len(docs) != 1 or not isinstance(docs[0], dict):
        return ["want exactly one YAML mapping"]
    p = docs[0]
    if p.get("apiVersion") != "krew.googlecontainertools.github.com/v1alpha2":
        errs.append("apiVersion %r" % p.get("apiVersion"))
    if p.get("kind") != "Plugin":
        errs.append("kind %r" % p.get("kind"))
    name = (p.get("metadata") or {}).get("name")
    want = os.path.basename(path).rsplit(".", 1)[0]
    if not name or not NAME.match(name) or name != want:
        errs.append("metadata.name %r must match the file name %r and %s" % (name, want, NAME.pattern))
    spec = p.get("spec") or {}
    sd = spec.get("shortDescription")
    if not isinstance(sd, str) or not sd or "\n" in sd or "\r" in sd:
        errs.append("spec.shortDescription must be one non-empty line")
    if not isinstance(spec.get("description"), str) or not spec["description"].strip():
        errs.append("spec.description is required")
    if not isinstance(spec.get("version"), str) or not SEMVER.match(spec["version"]):
        errs.append("spec.version %r is not a semantic version with a 'v' prefix" % spec.get("version"))
    plats = spec.get("platforms")
    if not isinstance(plats, list) or not plats:
        return errs + ["spec.platforms: at least one platform"]
    for i, pl in enumerate(plats):
        where = "spec.platforms[%d]" % i
        if not isinstance(pl, dict):
            errs.append(where + " is not a mapping")
            continue
        if not isinstance(pl.get("uri"), str) or not pl["uri"]:
            errs.append(where + ".uri has to be set")
        if not isinstance(pl.get("sha256"), str) or not SHA256.match(pl["sha256"]):
            errs.append(where + ".sha256 %r must match %s" % (pl.get("sha256"), SHA256.pattern))
        if not isinstance(pl.get("bin"), str) or not pl["bin"]:
            errs.append(where + ".bin has to be set")
        if "files" in pl:
            fl = pl["files"]
            if not isinstance(fl, list) or not fl or any(
                    not isinstance(x, dict) or not x.get("from") or not x.get("to") for x in fl):
                errs.append(where + ".files: unspecified, or a non-empty list of {from, to}")
        sel = pl.get("selector")
        if not isinstance(sel, dict) or (not sel.get("matchLabels") and not sel.get("matchExpressions")):
            errs.append(where + ".selector: empty or missing")
        else:
            keys = list((sel.get("matchLabels") or {}).keys()) + \
                [e.get("key") for e in (sel.get("matchExpressions") or [])]
            for k in keys:
                if k not in ("os", "arch"):
                    errs.append(where + ".selector: key %r not supported" % k)
    if archive:
        base = os.path.basename(archive)
        mine = [pl for pl in plats if isinstance(pl, dict) and str(pl.get("uri", "")).endswith("/" + base)]
        if len(mine) != 1:
            errs.append("%d platforms have a uri that names the archive %s, want exactly one" % (len(mine), base))
        else:
            pl = mine[0]
            with open(archive, "rb") as f:
                sum_ = hashlib.sha256(f.read()).hexdigest()
            if pl.get("sha256") != sum_:
                errs.append("sha256 %s, the archive's is %s" % (pl.get("sha256"), sum_))
            with tarfile.open(archive) as t:
                names = [m.name.lstrip("./") for m in t.getmembers() if m.isfile()]
                mode = {m.name.lstrip("./"): m.mode for m in t.getmembers()}
            b = pl.get("bin", "").lstrip("./")
            if b not in names:
                errs.append("bin %r is not in the archive (%s)" % (b, ", ".join(names)))
            elif not mode[b] & 0o111:
                errs.append("bin %r is not executable in the archive" % b)
    return errs


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: krew_check.py MANIFEST [ARCHIVE]")
    try:
        problems = check(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None)
    except (OSError, yaml.YAMLError, tarfile.TarError) as e:
        problems = [str(e).replace("\n", " ")]
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print("ok")
