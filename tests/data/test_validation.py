"""Data a classifier cannot train on is refused when loaded, in one line that quotes no file content."""

import pytest

from adass.data import DataError, load_dataset


def _file(tmp_path, text: str, name: str = "d.svm") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("0 1:nan 2:1\n1 1:2 2:0\n0 1:1 2:1\n1 1:0 2:2\n", "NaN or infinite feature"),
        ("0 1:inf 2:1\n1 1:2 2:0\n0 1:1 2:1\n1 1:0 2:2\n", "NaN or infinite feature"),
        ("nan 1:1 2:1\n1 1:2 2:0\n0 1:1 2:1\n1 1:0 2:2\n", "NaN or infinite labels"),
        ("1 1:1 2:1\n1 1:2 2:0\n1 1:1 2:1\n1 1:0 2:2\n", "1 class"),
        ("root:*:19000:0:99999:7:::\n", "cannot parse"),
        ("".join(f"{i % 2} 2000000000:1\n" for i in range(300)), "GiB"),
    ],
)
def test_bad_svmlight_files_are_refused_in_one_line(tmp_path, text, said):
    with pytest.raises(DataError) as caught:
        load_dataset(f"svmlight:{_file(tmp_path, text)}")
    message = str(caught.value)
    assert said in message and len(message.splitlines()) == 1
    assert "root:*" not in message and "19000" not in message


def test_an_empty_train_or_test_split_is_refused(tmp_path):
    two = _file(tmp_path, "0 1:1 2:1\n1 1:2 2:0\n")
    with pytest.raises(DataError, match="train split is empty"):
        load_dataset(f"svmlight:{two},holdout=0.9")  # each class's one sample goes to test
    with pytest.raises(DataError, match="no samples"):
        load_dataset(f"svmlight:{two},test={_file(tmp_path, '', 'empty.svm')}")


def test_a_synthetic_set_far_past_memory_is_refused_before_it_is_drawn():
    with pytest.raises(DataError, match="GiB"):
        load_dataset("synthetic:n=10000000,d=100000")
