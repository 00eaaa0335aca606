"""llama.cpp's llama-server as a bench baseline (apply_edit/models/llama_server.py): plain greedy decoding and its
n-gram speculation give the same text, and the server reads our prompt text as our tokenizer does.

Skipped unless a llama-server binary is there (`apply-edit model build-llama-server` or $APPLY_EDIT_LLAMA_SERVER):
building it takes minutes, so the test run never does."""

import pytest

from apply_edit.models.llama_server import LlamaServer, Speculation, llama_server_path, model_gguf

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(llama_server_path() is None,
                       reason="no llama-server: build it with `apply-edit model build-llama-server` "
                              "(about 8 minutes on 2 cores; the [llama] extra) or set APPLY_EDIT_LLAMA_SERVER"),
]

ORIGINAL = (
    "def area(w, h):\n    return w * h\n\n\n"
    "def perimeter(w, h):\n    return 2 * (w + h)\n\n\n"
    "def main():\n    print(area(2, 3))\n    print(perimeter(2, 3))\n"
)
# 194 prompt tokens. The small model copies the file here (32 tokens, no stop); with an update at the top of
# the file it writes the snippet's `# ... existing code ...` and stops after 27.
UPDATE = "# ... existing code ...\n\n\ndef perimeter(w, h):\n    return 2 * w + 2 * h\n\n\n# ... existing code ...\n"


def test_plain_and_ngram_speculation_agree():
    from transformers import AutoTokenizer

    from apply_edit.models.registry import DEFAULT_MODEL, resolve
    from apply_edit.judging.prompting import FORMATS, build_prompt

    tokenizer = AutoTokenizer.from_pretrained(resolve(DEFAULT_MODEL))  # the engine's tokenizer of this GGUF
    fmt = FORMATS["tags"]
    prompt = build_prompt(tokenizer, fmt, ORIGINAL, UPDATE).text
    ours = tokenizer(prompt, add_special_tokens=False).input_ids
    assert 100 <= len(ours) <= 200
    gguf = model_gguf(DEFAULT_MODEL)

    runs = {}
    for name, spec in (("plain", None), ("ngram", Speculation("ngram-simple"))):
        with LlamaServer(gguf, ctx=1024, spec=spec) as server:
            theirs = server.tokenize(prompt)
            runs[name] = server.complete(prompt, max_new=32, stop=[fmt.close])
        # The server parses <|im_start|> etc. as special tokens and adds no BOS for this GGUF: same ids.
        assert theirs == ours, f"llama.cpp {len(theirs)} tokens, ours {len(ours)}"
        done = runs[name]
        assert done.prompt_tokens == len(ours)
        assert done.cached_tokens == 0  # cache_prompt false
        assert done.new_tokens == len(done.tokens) == 32 and done.stop_type == "limit"
        assert done.prompt_ms > 0 and done.predicted_ms > 0 and 0 < done.ttft_s <= done.wall_s
        assert done.text.startswith("def area(w, h):\n")

    plain, ngram = runs["plain"], runs["ngram"]
    assert plain.draft_n is None
    assert ngram.draft_n and ngram.draft_accepted, "ngram-simple drafted nothing on a copy-heavy output"
    assert ngram.draft_accepted <= ngram.draft_n < 32
    assert ngram.tokens == plain.tokens and ngram.text == plain.text
