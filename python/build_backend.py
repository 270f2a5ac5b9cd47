"""The package's build backend (PEP 517), standard library only, so that
`pip install --no-build-isolation ./python` needs no network and no wheel
or setuptools: build_wheel zips gpt/ with its metadata; build_sdist tars
the directory's sources."""
import base64
import hashlib
import os
import tarfile
import zipfile

NAME, VERSION = "gpt", "0.1.0"
HERE = os.path.dirname(os.path.abspath(__file__))
METADATA = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: GPT-2 with the gpt command's exact bits: "
            "ctypes over libgpt.so\nLicense: MIT\nRequires-Python: >=3.8\n" % (NAME, VERSION))
WHEEL = "Wheel-Version: 1.0\nGenerator: gpt build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = "%s-%s-py3-none-any.whl" % (NAME, VERSION)
    info = "%s-%s.dist-info" % (NAME, VERSION)
    files = []
    for f in sorted(os.listdir(os.path.join(HERE, NAME))):
        if f.endswith(".py"):
            with open(os.path.join(HERE, NAME, f), "rb") as fh:
                files.append(("%s/%s" % (NAME, f), fh.read()))
    files += [(info + "/METADATA", METADATA.encode()), (info + "/WHEEL", WHEEL.encode()),
              (info + "/top_level.txt", (NAME + "\n").encode())]
    record = [_record_line(p, d) for p, d in files] + [info + "/RECORD,,"]
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in files:
            z.writestr(p, d)
        z.writestr(info + "/RECORD", "\n".join(record) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, VERSION)
    with tarfile.open(os.path.join(sdist_directory, base + ".tar.gz"), "w:gz") as t:
        for f in ("pyproject.toml", "build_backend.py", NAME + "/__init__.py"):
            t.add(os.path.join(HERE, f), arcname=base + "/" + f)
        data = METADATA.encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(data)
        import io
        t.addfile(ti, io.BytesIO(data))
    return base + ".tar.gz"
