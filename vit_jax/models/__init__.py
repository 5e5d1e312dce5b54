"""Model library: attention, blocks, and the ViT, BiT ResNet, Mixer/FNet, BERT, GPT and seq2seq
families."""

from vit_jax.models.bert import Bert
from vit_jax.models.bert import BertForMaskedLM
from vit_jax.models.bert import BertForPreTraining
from vit_jax.models.bert import BertForSequenceClassification
from vit_jax.models.gpt import Gpt
from vit_jax.models.mixer import FNet
from vit_jax.models.mixer import MlpMixer
from vit_jax.models.registry import build_model
from vit_jax.models.registry import MODELS
from vit_jax.models.resnet import ResNetV2
from vit_jax.models.seq2seq import EncoderDecoder
from vit_jax.models.vit import ViT

__all__ = [
    "Bert",
    "BertForMaskedLM",
    "BertForPreTraining",
    "BertForSequenceClassification",
    "Gpt",
    "FNet",
    "MlpMixer",
    "build_model",
    "MODELS",
    "EncoderDecoder",
    "ResNetV2",
    "ViT",
]
