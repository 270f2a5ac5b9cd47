#!/bin/sh
# cli_serve_embed.sh - gpt serve's embeddings: POST /v1/embeddings
# (OpenAI's shape) and /api/embed (Ollama's), by tests/serve/embed_check.py:
#   - each vector, raw ("normalize": false) and of unit length, within 1e-5
#     (relative, of the vector) of a float64 forward pass written from
#     transformers' GPT2Model (tests/reference_forward.py): the mean of the
#     last hidden state (the default pooling) on gpt2-124M-shaped, up to
#     the whole context; the last token's (--pooling last) on tiny;
#   - 16 texts of 1 to about 320 tokens in one call (as text, as token ids,
#     as base64) give each text's vector alone, bit for bit, and so do 4
#     clients at once, each with the texts in another order;
#   - a completion sent while 24 inputs are embedded is answered first (the
#     engine thread runs one input between two steps);
#   - the answer's shape (object, index, model, usage), /api/embed's
#     vectors and prompt_eval_count, its truncate (default: the first
#     context's tokens; false: a 400);
#   - the clients (tests/serve/embed_client.mjs): the `openai` npm
#     client's embeddings.create (its default base64, float, base64 as
#     sent, dimensions refused: 400 naming it), LangChain's
#     OpenAIEmbeddings (embedQuery, embedDocuments) and the `ollama`
#     client's embed, each vector the server's own bits.
# The bad bodies are cli_serve_faults.sh's. Without node or the packages in
# $NODE_DIR the clients' part is skipped; with GPT_TEST_REQUIRE_ALL=1 that
# fails. Needs /usr/bin/python3 with numpy.
# Prints "cli_serve_embed: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), CKPT_DIR (default build/ckpt), NODE_DIR (default ~/.cache/gpt/node).
GPT=${GPT:-build/gpt}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
NODE_DIR=${NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpt/node}
GPT_TUNE=${GPT_TUNE:-off}
export GPT_TUNE
CHECK_NAME=cli_serve_embed
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need_python numpy
# a sanitizer build (make asan) runs each step several times slower:
# embed_check.py puts a lighter load on it (EMBED_LIGHT: 2 clients, 12 inputs)
if readelf -d "$GPT" 2> /dev/null | grep -q libasan; then
    EMBED_LIGHT=1
    export EMBED_LIGHT
fi
KEY=sekret-embed
start "$tmp/mean.log" -m "$CKPT_DIR/gpt2-124M-shaped" --api-key "$KEY" -t 2 || { summary; exit 1; }
port_mean=$port
start "$tmp/last.log" -m "$CKPT_DIR/tiny" --api-key "$KEY" --pooling last -t 1 || { summary; exit 1; }
port_last=$port

set -- "$port_mean" "$CKPT_DIR/gpt2-124M-shaped" "$port_last" "$CKPT_DIR/tiny" "$KEY"
if command -v node > /dev/null 2>&1 && [ -f "$NODE_DIR/node_modules/openai/package.json" ] &&
    [ -f "$NODE_DIR/node_modules/@langchain/openai/package.json" ] &&
    [ -f "$NODE_DIR/node_modules/ollama/package.json" ]; then
    set -- "$@" "$NODE_DIR"
else
    skip_part "the clients: node with openai, @langchain/openai and ollama in $NODE_DIR"
fi
/usr/bin/python3 tests/serve/embed_check.py "$@" > "$tmp/check.log" 2>&1
add_counts "$tmp/check.log" "embed_check.py"
summary
