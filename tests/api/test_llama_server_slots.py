"""llama-server's slot routes on `hearth serve` (issue 20): GET /slots with
--slots, and POST /slots/{id}?action=save|restore|erase with --slot-save-path.

References, none produced by hearth: llama-server's README and server.cpp at
llama.cpp c392e50 (read, never copied) for the routes, their switches (both
off by default: 501), the answers' fields (id_slot, filename, n_saved /
n_restored, n_written / n_read, timings, n_erased) and the /slots list's
(id, n_ctx, is_processing, params, next_token); stories260K's GOLDEN.txt for
the text a restored cache must continue exactly as a fresh one.
"""
import json
import os
import shutil
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import SHARED, Server, get_json, request, run, scratch_dir  # noqa: E402

STORIES = os.path.join(SHARED, "models", "stories260K", "stories260K.gguf")
PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside"
SAVE_DIR = scratch_dir("hearth-slots-")


def post_json(port, path, doc, timeout=120):
    st, _, out = request(port, "POST", path, body=json.dumps(doc).encode(),
                         headers={"Content-Type": "application/json"}, timeout=timeout)
    return st, json.loads(out)


class Held:
    srv = None


def srv():
    # one live sequence and no idle cache slots: a request always lands in slot 0,
    # so the test knows which slot holds what (llama-server with -np 1)
    if Held.srv is None:
        Held.srv = Server("--model", STORIES, "--parallel", "1", "--cache-slots", "0", "--ctx-size", "256",
                          "--slots", "--slot-save-path", SAVE_DIR, "--log-level", "info", timeout=120)
    return Held.srv


def test_off_by_default():
    """llama-server without --slots answers GET /slots with 501, and slot actions without
    --slot-save-path with 501 (not_supported)."""
    with Server("--model", STORIES, "--log-level", "warn", timeout=120) as s:
        st, doc = get_json(s.port, "/slots")
        assert st == 501 and doc["error"]["type"] == "not_supported_error", doc
        assert "--slots" in doc["error"]["message"], doc
        st, doc = post_json(s.port, "/slots/0?action=save", {"filename": "a.bin"})
        assert st == 501 and "--slot-save-path" in doc["error"]["message"], doc
    with Server("--model", STORIES, "--no-slots", "--log-level", "warn", timeout=120) as s:
        assert get_json(s.port, "/slots")[0] == 501


def test_slots_list():
    """GET /slots: one object per slot, llama-server's fields; is_processing true while a
    request runs in it, and params are that request's."""
    port = srv().port
    st, slots = get_json(port, "/slots")
    assert st == 200 and isinstance(slots, list) and len(slots) == 1, slots
    s0 = slots[0]
    assert s0["id"] == 0 and s0["n_ctx"] == 256 and s0["is_processing"] is False, s0
    for k in ("temperature", "top_k", "top_p", "min_p", "seed", "n_predict"):
        assert k in s0["params"], (k, s0)
    assert s0["next_token"]["has_next_token"] is False, s0
    # while a long generation runs, the slot shows it
    done = {}

    def long_run():
        done["r"] = post_json(port, "/completion", {"prompt": PROMPT, "n_predict": 150, "temperature": 0.5,
                                                    "top_k": 7, "ignore_eos": True, "seed": 3})
    t = threading.Thread(target=long_run)
    t.start()
    seen = None
    for _ in range(400):
        st, slots = get_json(port, "/slots")
        if slots[0]["is_processing"]:
            seen = slots[0]
            break
    t.join()
    assert done["r"][0] == 200, done
    if seen is not None:  # on a very fast machine the request may end between two polls
        assert seen["params"]["top_k"] == 7 and abs(seen["params"]["temperature"] - 0.5) < 1e-6, seen
        assert seen["prompt"].endswith(PROMPT), seen
        assert seen["next_token"]["has_next_token"] is True, seen
    st, slots = get_json(port, "/slots")
    assert slots[0]["is_processing"] is False and slots[0]["next_token"]["n_decoded"] == 150, slots
    assert slots[0]["params"]["top_k"] == 7, slots  # the last request's, as llama-server shows
    # ?fail_on_no_slot=1: 200 while a slot is idle
    assert get_json(port, "/slots?fail_on_no_slot=1")[0] == 200


def test_save_erase_restore_reuses_the_prefix():
    """Save after a completion, erase, restore: the next completion with cache_prompt reuses
    the restored positions (tokens_cached) and continues exactly as before."""
    port = srv().port
    req = {"prompt": PROMPT, "n_predict": 8, "temperature": 0, "cache_prompt": True}
    st, first = post_json(port, "/completion", req)
    assert st == 200, first
    n_prompt = first["tokens_evaluated"]
    st, saved = post_json(port, "/slots/0?action=save", {"filename": "lily.bin"})
    assert st == 200, saved
    assert saved["id_slot"] == 0 and saved["filename"] == "lily.bin", saved
    assert saved["n_saved"] >= n_prompt and saved["n_written"] > 0 and "save_ms" in saved["timings"], saved
    path = os.path.join(SAVE_DIR, "lily.bin")
    assert os.path.getsize(path) == saved["n_written"], saved
    assert not [f for f in os.listdir(SAVE_DIR) if ".tmp." in f]  # written through a temporary, renamed
    st, erased = post_json(port, "/slots/0?action=erase", {})
    assert st == 200 and erased == {"id_slot": 0, "n_erased": saved["n_saved"]}, erased
    # after the erase nothing is reused
    st, again = post_json(port, "/completion", dict(req, prompt=PROMPT + " and"))
    assert st == 200 and again["tokens_cached"] == 0, again
    # restore: the slot holds the saved positions again
    st, restored = post_json(port, "/slots/0?action=restore", {"filename": "lily.bin"})
    assert st == 200, restored
    assert restored["id_slot"] == 0 and restored["filename"] == "lily.bin", restored
    assert restored["n_restored"] == saved["n_saved"] and restored["n_read"] == saved["n_written"], restored
    assert "restore_ms" in restored["timings"], restored
    st, reused = post_json(port, "/completion", req)
    assert st == 200, reused
    assert reused["tokens_cached"] == n_prompt - 1, reused  # all but the last prompt token, whose logits start the answer
    assert reused["content"] == first["content"], (reused["content"], first["content"])


def test_bad_requests():
    """Bad filenames, ids and actions are 400s; a missing file is a 400 naming it; a file of
    another shape is refused saying why."""
    port = srv().port
    for bad in ("", "../x.bin", "a/b.bin", ".hidden", "..", "x" * 256, "a\\b", "a\nb", "x.", " x"):
        st, doc = post_json(port, "/slots/0?action=save", {"filename": bad})
        assert st == 400 and "filename" in doc["error"]["message"], (bad, st, doc)
    st, doc = post_json(port, "/slots/0?action=save", {"filename": 7})
    assert st == 400, doc
    st, doc = post_json(port, "/slots/0?action=save", {})
    assert st == 400, doc
    assert post_json(port, "/slots/9?action=save", {"filename": "a.bin"})[0] == 400
    assert post_json(port, "/slots/x?action=save", {"filename": "a.bin"})[0] == 400
    assert post_json(port, "/slots/0?action=fly", {"filename": "a.bin"})[0] == 400
    assert post_json(port, "/slots/0", {"filename": "a.bin"})[0] == 400
    st, doc = post_json(port, "/slots/0?action=restore", {"filename": "nothing-here.bin"})
    assert st == 400 and "nothing-here.bin" in doc["error"]["message"], doc
    with open(os.path.join(SAVE_DIR, "junk.bin"), "wb") as f:
        f.write(b"not a slot file at all" * 10)
    st, doc = post_json(port, "/slots/0?action=restore", {"filename": "junk.bin"})
    assert st == 400 and "not a hearth slot file" in doc["error"]["message"], doc
    # a slot file of another cache type (f32 here, f16 there) names the mismatch
    other = scratch_dir("hearth-slots-f32-")
    try:
        with Server("--model", STORIES, "--parallel", "1", "--cache-slots", "0", "--ctx-size", "256",
                    "--cache-type", "f32", "--slot-save-path", other, "--log-level", "warn", timeout=120) as s:
            assert post_json(s.port, "/completion", {"prompt": PROMPT, "n_predict": 2})[0] == 200
            assert post_json(s.port, "/slots/0?action=save", {"filename": "f32.bin"})[0] == 200
        shutil.copy(os.path.join(other, "f32.bin"), os.path.join(SAVE_DIR, "f32.bin"))
    finally:
        shutil.rmtree(other, ignore_errors=True)
    st, doc = post_json(port, "/slots/0?action=restore", {"filename": "f32.bin"})
    assert st == 400 and "f32" in doc["error"]["message"] and "cache" in doc["error"]["message"], doc
    # a truncated file
    with open(os.path.join(SAVE_DIR, "lily.bin"), "rb") as f:
        data = f.read()
    with open(os.path.join(SAVE_DIR, "cut.bin"), "wb") as f:
        f.write(data[:-10])
    st, doc = post_json(port, "/slots/0?action=restore", {"filename": "cut.bin"})
    assert st == 400 and "bytes" in doc["error"]["message"], doc


def test_busy_slot_is_refused():
    """A slot action on a slot a request holds is a 409 (llama-server waits instead)."""
    port = srv().port
    done = {}

    def long_run():
        done["r"] = post_json(port, "/completion", {"prompt": PROMPT, "n_predict": 200, "ignore_eos": True})
    t = threading.Thread(target=long_run)
    t.start()
    got = None
    for _ in range(400):
        if get_json(port, "/slots")[1][0]["is_processing"]:
            st, doc = post_json(port, "/slots/0?action=restore", {"filename": "lily.bin"})
            if st == 409:
                got = doc
                break
    t.join()
    assert done["r"][0] == 200
    if got is not None:
        assert "processing" in got["error"]["message"], got


TESTS = [test_off_by_default, test_slots_list, test_save_erase_restore_reuses_the_prefix, test_bad_requests,
         test_busy_slot_is_refused]

if __name__ == "__main__":
    try:
        run(TESTS)
    finally:
        if Held.srv is not None:
            Held.srv.stop()
