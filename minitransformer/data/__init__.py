"""Data for the course: datasets, tokenizers and batching (lessons 01 and 07).

- :func:`load_dates`: the embedded default, long dates between two languages (Babel).
- :func:`load_multi30k`: Multi30k German-English, downloaded, checked and cached.
- :func:`load_parallel_text`: any pair of line-aligned text files.
- :class:`SharedTokenizer`: BPE vocabulary shared by source and target.
- :func:`learn_bpe`, :func:`apply_bpe`, :func:`bpe_tokens`: BPE written out, equal to ``tokenizers`` (lesson 01).
- :class:`Vocabulary`: a tiny word-level vocabulary for in-notebook examples.
- :func:`load_tiny_shakespeare`, :class:`CharTokenizer`: the language-model corpus of lesson 09.
- :func:`load_word_order`: the sentence-classification task of lesson 09b.
- :class:`TokenBatchSampler`, :func:`collate_pairs`, :class:`Batch`: token-budget batches.
"""

from .bpe import apply_bpe, bpe_tokens, learn_bpe, pre_tokenize, word_counts
from .batching import Batch, TokenBatchSampler, collate_pairs, padding_fraction
from .dates import date_pair, load_dates
from .multi30k import ChecksumError, fetch_multi30k, load_multi30k, multi30k_dir
from .text import load_parallel_text, read_lines, user_cache_dir
from .tokenizer import SharedTokenizer, TokenizationReport, tokenization_report
from .shakespeare import CharTokenizer, Corpus, lm_batch, load_tiny_shakespeare, split_ids
from .vocab import Vocabulary
from .word_order import WordOrderData, load_word_order, pad_sequences, plain_words, shuffle_word_order

__all__ = [
    "Batch",
    "ChecksumError",
    "SharedTokenizer",
    "TokenBatchSampler",
    "TokenizationReport",
    "Vocabulary",
    "CharTokenizer",
    "Corpus",
    "WordOrderData",
    "lm_batch",
    "load_tiny_shakespeare",
    "load_word_order",
    "pad_sequences",
    "plain_words",
    "shuffle_word_order",
    "split_ids",
    "collate_pairs",
    "date_pair",
    "fetch_multi30k",
    "load_dates",
    "load_multi30k",
    "load_parallel_text",
    "multi30k_dir",
    "padding_fraction",
    "pre_tokenize",
    "apply_bpe",
    "bpe_tokens",
    "learn_bpe",
    "word_counts",
    "read_lines",
    "tokenization_report",
    "user_cache_dir",
]
