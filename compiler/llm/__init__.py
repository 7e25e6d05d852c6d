"""Decoder language models: a prefill and a one-token decode step over a static KV cache.

config      a Hugging Face decoder's shape (`DecoderConfig`), no torch import
arch        the decoder as two static torch programs (prefill, step)
cache       the KV cache a session holds, and its portable transfer layout
sampling    greedy, temperature and top-k choice of the next token
decoder     the decoder artifact (compile, verify, load) and `DecoderSession.generate`
placement   arbitrage: each phase on the local device measured cheapest
hf          loading a Hugging Face model directory (`luminal compile DIR`)
"""
