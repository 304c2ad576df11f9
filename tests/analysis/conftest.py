"""The tiny GPT-2 of the generation tests, for the zero-shot detector."""

from tests.generation.conftest import one_torch_thread, tiny_model_dir  # noqa: F401
