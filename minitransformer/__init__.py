"""minitransformer: the Transformer of "Attention Is All You Need", built to be read.

Every lesson of the course imports its pieces from here. Importing has no side effects.
"""

from .attention import MultiHeadAttention, scaled_dot_product_attention
from .config import TransformerConfig
from .cache import DecoderCache, KVCache, LayerCache
from .decoding import beam_search, greedy_decode, length_penalty
from .evaluation import bleu, exact_match, translate_sentences
from .embeddings import (LearnedPositionalEmbedding, NoPositionalEncoding, PositionalEncoding, TokenEmbedding,
                         make_positional, sinusoidal_positional_encoding)
from .interop import decoder_layer_to_torch, encoder_layer_to_torch, mha_to_torch, to_torch_nn_mask
from .layers import DecoderLayer, EncoderLayer, LayerNorm, PositionwiseFeedForward
from .masks import check_mask, make_causal_mask, make_padding_mask, make_target_mask
from .model import Decoder, Encoder, Transformer
from .training import (
    CheckpointError,
    LabelSmoothingLoss,
    TrainOptions,
    average_checkpoints,
    load_checkpoint,
    load_model,
    save_checkpoint,
    train,
    transformer_lr,
    transformer_scheduler,
)
from .utils import get_device, set_seed
from .variants import (BagOfWordsClassifier, DecoderOnlyLM, EncoderClassifier, masked_mean, next_token_probabilities,
                       sample_next_token)

__version__ = "0.1.0"

__all__ = [
    "Decoder",
    "DecoderCache",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "KVCache",
    "LayerCache",
    "LayerNorm",
    "MultiHeadAttention",
    "PositionalEncoding",
    "LearnedPositionalEmbedding",
    "NoPositionalEncoding",
    "make_positional",
    "PositionwiseFeedForward",
    "TokenEmbedding",
    "Transformer",
    "TransformerConfig",
    "check_mask",
    "decoder_layer_to_torch",
    "encoder_layer_to_torch",
    "get_device",
    "beam_search",
    "greedy_decode",
    "length_penalty",
    "make_causal_mask",
    "make_padding_mask",
    "make_target_mask",
    "mha_to_torch",
    "scaled_dot_product_attention",
    "set_seed",
    "sinusoidal_positional_encoding",
    "to_torch_nn_mask",
    "CheckpointError",
    "LabelSmoothingLoss",
    "TrainOptions",
    "average_checkpoints",
    "bleu",
    "exact_match",
    "load_checkpoint",
    "load_model",
    "save_checkpoint",
    "train",
    "transformer_lr",
    "transformer_scheduler",
    "translate_sentences",
    "BagOfWordsClassifier",
    "DecoderOnlyLM",
    "EncoderClassifier",
    "masked_mean",
    "next_token_probabilities",
    "sample_next_token",
]
