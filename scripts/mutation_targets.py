"""What scripts/mutation.py mutates, and the tests it runs against each module's mutants."""

TASK_TESTS = ["tests/training/test_task_losses.py", "tests/training/test_eval_sums.py"]
LOSS_SCOPE = (
    "totals",
    "loss",
    "eval_sums",
    "eval_summary",
    "_sums",
    "_nsp_sums",
    "weighted_cross_entropy",
)
PROPERTIES = "tests/models/test_properties.py"
# module -> (targeted tests, functions to mutate (None: the whole module)). Each list holds the
# tests that check the module against something independent (formulas, NumPy, timm or Hugging
# Face), fastest first: pytest stops at the first failure (-x), so a killed mutant costs little.
TARGETS = {
    "vit_jax/models/attention.py": (
        ["tests/models/test_attention.py", "tests/models/test_kv_cache.py"],
        None,
    ),
    "vit_jax/models/chunked_attention.py": (
        ["tests/perf/test_chunked_attention.py", "tests/models/test_attention.py"],
        None,
    ),
    "vit_jax/models/masks.py": (
        [
            "tests/models/test_attention.py",
            PROPERTIES + "::test_causal_gradient_is_exactly_zero_for_future_inputs",
            PROPERTIES + "::test_packed_segments_leak_nothing",
            PROPERTIES + "::test_bert_padding_leaves_real_tokens_unchanged",
        ],
        None,
    ),
    "vit_jax/models/position.py": (
        ["tests/models/test_position.py"],
        None,
    ),
    "vit_jax/models/layers.py": (
        [
            "tests/models/test_layers.py",
            PROPERTIES + "::test_patch_embedding_equals_explicit_patch_matmul",
            "tests/interop/test_timm.py",
        ],
        None,
    ),
    "vit_jax/models/transformer.py": (
        [
            "tests/models/test_transformer.py",
            "tests/models/test_block_config.py::test_scanned_layers_compute_the_unrolled_stack",
            PROPERTIES,
            "tests/interop/test_gpt2_hf.py::test_import",
            "tests/interop/test_bert_hf.py::test_import_pretraining",
        ],
        None,
    ),
    "vit_jax/models/vit.py": (
        [
            "tests/models/test_presets.py",
            "tests/models/test_param_counts.py",
            "tests/models/test_errors.py",
            "tests/models/test_position.py::test_vit_cls_token_gets_no_fixed_embedding",
            PROPERTIES + "::test_patch_embedding_equals_explicit_patch_matmul",
            "tests/interop/test_timm.py",
            "tests/interop/test_vit_hf.py",
        ],
        None,
    ),
    "vit_jax/models/mixer.py": (
        [
            "tests/models/test_mixer.py",
            "tests/models/test_param_counts.py::test_mixer_b16",
            "tests/models/test_presets.py::test_image_classifiers_default_to_imagenet_classes",
            "tests/models/test_presets.py::test_mixer_presets_are_the_published_shapes",
        ],
        None,
    ),
    "vit_jax/models/resnet.py": (
        ["tests/models/test_presets.py", "tests/models/test_resnet.py"],
        None,
    ),
    "vit_jax/models/gpt.py": (
        [
            "tests/models/test_presets.py::test_gpt_presets_and_default_vocabulary_follow_gpt2",
            "tests/models/test_param_counts.py::test_gpt2_small_tied",
            PROPERTIES + "::test_gpt_is_causal_in_its_token_embeddings",
            "tests/interop/test_gpt2_hf.py",
            "tests/models/test_kv_cache.py",
        ],
        None,
    ),
    "vit_jax/models/bert.py": (
        [
            "tests/models/test_presets.py::test_bert_presets_follow_turc_et_al",
            "tests/models/test_param_counts.py::test_bert_base_with_pooler",
            PROPERTIES + "::test_bert_padding_leaves_real_tokens_unchanged",
            "tests/interop/test_bert_hf.py",
        ],
        None,
    ),
    "vit_jax/models/seq2seq.py": (
        ["tests/models/test_seq2seq.py", "tests/models/test_kv_cache.py"],
        None,
    ),
    "vit_jax/models/registry.py": (
        [
            "tests/models/test_errors.py",
            "tests/models/test_presets.py",
            "tests/models/test_param_counts.py",
        ],
        None,
    ),
    "vit_jax/models/counting.py": (
        [
            "tests/models/test_param_counts.py",
            "tests/perf/test_flops.py::test_gpt_flops_are_palm_formula",
            "tests/perf/test_flops.py::test_vit_flops_count_patches_attention_and_a_once_per_image_head",
            "tests/perf/test_flops.py::test_bert_mlm_counts_its_tied_output_projection",
        ],
        None,
    ),
    "vit_jax/data/text/masking.py": (["tests/text/test_masking.py"], None),
    "vit_jax/data/text/packing.py": (["tests/text/test_packing.py"], None),
    "vit_jax/tasks/classification.py": (TASK_TESTS, LOSS_SCOPE),
    "vit_jax/tasks/text_common.py": (TASK_TESTS, LOSS_SCOPE),
    "vit_jax/tasks/causal_lm.py": (TASK_TESTS, LOSS_SCOPE),
    "vit_jax/tasks/masked_lm.py": (TASK_TESTS, LOSS_SCOPE),
    "vit_jax/tasks/seq2seq.py": (TASK_TESTS, LOSS_SCOPE),
    "vit_jax/tasks/text_classification.py": (TASK_TESTS, LOSS_SCOPE),
    "vit_jax/training/train_step.py": (
        [
            "tests/training/test_train_step.py",
            "tests/training/test_step_math.py",
            "tests/training/test_learning.py::test_loss_falls_by_a_margin[vit-40-0.003-0.2]",
        ],
        None,
    ),
}
