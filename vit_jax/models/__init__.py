"""Model library: attention, blocks, and the ViT, Mixer/FNet, BERT, GPT and seq2seq families."""

from vit_jax.models.bert import Bert, BertForMaskedLM, BertForPreTraining, BertForSequenceClassification
from vit_jax.models.gpt import Gpt
from vit_jax.models.mixer import FNet, MlpMixer
from vit_jax.models.registry import MODELS, build_model
from vit_jax.models.seq2seq import EncoderDecoder
from vit_jax.models.vit import ViT
