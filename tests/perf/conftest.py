from tests.training.conftest import digits_dir  # pylint: disable=unused-import
