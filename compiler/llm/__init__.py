"""Decoder language models: a prefill and a one-token decode step over a static KV cache.

arch       a Hugging Face decoder as two static torch programs (prefill, step)
"""
