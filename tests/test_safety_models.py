"""Issue 15, models: the cache trusts only entries it can verify, builds under a lock, leaves no
orphans after a kill, and every bad model spec gets a one-line error before any work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from attn_sink_circuits.models import cache
from attn_sink_circuits.models import load as load_mod
from attn_sink_circuits.models.load import load_model

SHA = "a" * 64
WEIGHTS = b"w" * 1000


def fake_build(log: list | None = None, sha: str = SHA):
    def build(folder: Path) -> dict:
        (folder / "config.json").write_text('{"model_type": "llama"}')
        (folder / "model.safetensors").write_bytes(WEIGHTS)
        if log is not None:
            log.append(folder)
        return {"key": "m", "gguf_sha256": sha}

    return build


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "models").iterdir() if p.name.startswith((".tmp", ".tr")))


# -- manifest trust ---------------------------------------------------------------------------


def _entry(root: Path) -> Path:
    entry, manifest, cached = cache.ensure_entry("m", fake_build(), SHA)
    assert not cached and manifest["gguf_sha256"] == SHA
    return entry


def _rewrite(entry: Path, change) -> None:
    manifest = json.loads((entry / cache.MANIFEST).read_text())
    change(manifest)
    (entry / cache.MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda m: m["files"].update({"../../../dev/zero": {"size": 0, "sha256": SHA}}),
            "not inside",
        ),
        (lambda m: m["files"].update({"/dev/zero": {"size": 0, "sha256": SHA}}), "not inside"),
        (lambda m: m.update(files={}), "lists no files"),
        (lambda m: m["files"].pop("model.safetensors"), "not listed: \\['model.safetensors'\\]"),
        (lambda m: m.update(gguf_sha256="b" * 64), "not the source's"),
        (lambda m: m["files"]["config.json"].update(sha256="nope"), "no size / sha256"),
    ],
    ids=["path-escape", "absolute", "no-files", "omits-weights", "stale-gguf-hash", "bad-hash"],
)
def test_an_untrusted_manifest_is_refused_and_the_entry_rebuilt(root, change, reason):
    entry = _entry(root)
    _rewrite(entry, change)
    with pytest.raises(cache.CacheEntryError, match=reason):
        cache.verify_entry(entry, SHA)
    built = []
    again, manifest, cached = cache.ensure_entry("m", fake_build(built), SHA)
    assert not cached and len(built) == 1 and again == entry
    assert cache.verify_entry(entry, SHA) == manifest
    assert leftovers(root) == []


def test_a_link_out_of_the_entry_is_refused(root):
    entry = _entry(root)
    (entry / "model.safetensors").unlink()
    (entry / "model.safetensors").symlink_to("/dev/zero")
    with pytest.raises(cache.CacheEntryError, match="not inside"):
        cache.verify_entry(entry)
    (entry / "model.safetensors").unlink()
    (entry / "model.safetensors").symlink_to(entry / "config.json")
    with pytest.raises(cache.CacheEntryError, match="not a regular file"):
        cache.verify_entry(entry)


def test_sizes_are_checked_before_any_hash(root, monkeypatch):
    entry = _entry(root)
    (entry / "model.safetensors").write_bytes(WEIGHTS[:-1])
    hashed, real = [], cache.sha256_file
    monkeypatch.setattr(cache, "sha256_file", lambda p: hashed.append(p) or real(p))
    with pytest.raises(cache.CacheEntryError, match="999 bytes, not 1000"):
        cache.verify_entry(entry)
    assert hashed == []
    # Same size, one byte changed: the quick check (for listings) stops at sizes and passes;
    # the full one hashes and refuses.
    (entry / "model.safetensors").write_bytes(WEIGHTS[:-1] + b"x")
    assert cache.read_manifest(entry, hashes=False) is not None and hashed == []
    with pytest.raises(cache.CacheEntryError, match="does not have the sha256"):
        cache.verify_entry(entry)
    assert hashed


def test_the_manifest_of_the_entry_loaded_is_returned(root):
    """Provenance comes from the entry used: after a source change, the rebuilt entry's hash."""
    _entry(root)
    entry, manifest, cached = cache.ensure_entry("m", fake_build(sha="c" * 64), "c" * 64)
    assert not cached and manifest["gguf_sha256"] == "c" * 64
    assert cache.ensure_entry("m", fake_build(), "c" * 64)[1:] == (manifest, True)


def test_an_unwritable_cache_is_a_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(cache.CACHE_ENV, str(blocker / "cache"))
    with pytest.raises(ValueError, match="cannot be written.*set CIRCUITS_CACHE"):
        cache.ensure_entry("m", fake_build(), SHA)
    assert cache.clean_stale() == [] and cache.stale_items() == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_cache_is_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / "cache" / "models").mkdir(parents=True)
    (tmp_path / "cache" / "models").chmod(0o555)
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="cannot be written.*set CIRCUITS_CACHE"):
        cache.ensure_entry("m", fake_build(), SHA)


# -- kills, locks and leftovers ---------------------------------------------------------------

# A build in another process: writes the files, notes that it ran, then waits `sleep` seconds.
BUILDER = textwrap.dedent(
    """
    import sys, time
    from attn_sink_circuits.models import cache

    def build(folder):
        (folder / "config.json").write_text('{"model_type": "llama"}')
        (folder / "model.safetensors").write_bytes(b"w" * 1000)
        with open(sys.argv[1], "a") as log:
            log.write("built\\n")
        time.sleep(float(sys.argv[2]))
        return {"key": "m", "gguf_sha256": "a" * 64}

    folder, manifest, cached = cache.ensure_entry("m", build, "a" * 64)
    print(folder, cached)
    """
)


def _builder(root: Path, log: Path, sleep: float) -> subprocess.Popen:
    env = {**os.environ, cache.CACHE_ENV: str(root)}
    return subprocess.Popen(
        [sys.executable, "-c", BUILDER, str(log), str(sleep)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_build(log: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while not (log.exists() and log.read_text()):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the build never started"
        time.sleep(0.05)


def test_kill_during_a_build_leaves_nothing_after_the_next_run(root, tmp_path):
    log = tmp_path / "log"
    proc = _builder(root, log, sleep=60)
    _wait_for_build(log, proc)
    # While it builds, its scratch folder is live: neither listed as stale nor removed.
    assert leftovers(root) and cache.stale_items() == [] and cache.clean_stale() == []
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    orphans = leftovers(root)
    assert len(orphans) == 1 and orphans[0].startswith(".tmp-m~")
    stale = cache.stale_items()
    assert [s.path.name for s in stale] == orphans and stale[0].size >= len(WEIGHTS)
    # The next run removes the orphan and builds the entry.
    entry, _, cached = cache.ensure_entry("m", fake_build(), SHA)
    assert not cached and leftovers(root) == [] and cache.stale_items() == []
    assert cache.verify_entry(entry, SHA)


def test_orphans_of_an_older_version_are_cleaned_too(root):
    legacy = root / "models" / ".tmp-smollm2-135m-x1y2z3"  # written without a lock
    legacy.mkdir(parents=True)
    (legacy / "model.safetensors").write_bytes(WEIGHTS)
    fresh = root / "models" / ".tmp-smollm2-135m-a1b2c3"
    fresh.mkdir()
    hours = cache.LEGACY_HOURS * 3600 + 60
    os.utime(legacy, (time.time() - hours, time.time() - hours))
    trash = root / "models" / ".trash-m~0123abcd"  # a kill while an old entry was deleted
    trash.mkdir()
    removed = cache.clean_stale()
    assert {r.path.name for r in removed} == {legacy.name, trash.name}
    assert leftovers(root) == [fresh.name]  # young enough that an old version may be building


def test_two_writers_build_once_and_share_the_entry(root, tmp_path):
    log = tmp_path / "log"
    first = _builder(root, log, sleep=2)
    _wait_for_build(log, first)
    second = _builder(root, log, sleep=2)  # starts while the first still builds
    outs = [p.communicate(timeout=180) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    assert log.read_text() == "built\n"  # one build; the second waited and used it
    folders = [out.split() for out, _ in outs]
    assert folders[0][0] == folders[1][0] and [f[1] for f in folders] == ["False", "True"]
    assert leftovers(root) == []


# -- bad model specs: one clear line before any work ------------------------------------------


def test_a_truncated_gguf_is_named_not_a_struct_error(root, tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x01")
    with pytest.raises(ValueError, match="model.gguf is a truncated or damaged GGUF file"):
        load_model(bad)
    assert leftovers(root) == []


def test_a_missing_gguf_path_is_not_an_unknown_key(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or folder: .*missing.gguf"):
        load_model(tmp_path / "missing.gguf")
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        load_model("models/missing.gguf")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("{not json", "config.json is not valid JSON"),
        ('["a list"]', 'config.json has no "model_type"'),
        ('{"architectures": ["LlamaForCausalLM"]}', 'config.json has no "model_type"'),
    ],
)
def test_a_bad_config_is_named(tmp_path, config, message):
    (tmp_path / "config.json").write_text(config)
    with pytest.raises(ValueError, match=message):
        load_model(tmp_path)


def test_a_folder_without_a_tokenizer_says_so(tmp_path):
    from transformers import LlamaConfig

    LlamaConfig(architectures=["LlamaForCausalLM"]).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="has no tokenizer .*tokenizer.save_pretrained"):
        load_model(tmp_path)


def test_a_hub_name_without_the_hub_fails_at_once(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    called = []
    monkeypatch.setattr(
        load_mod.TransformerBridge, "boot_transformers", lambda *a, **k: called.append(a)
    )
    with pytest.raises(ValueError, match="'foo/bar' is not a local file.*HF_HUB_OFFLINE is set"):
        load_model("foo/bar")
    assert not called
