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
        ("0.25 1:1 2:1\n1 1:2 2:0\n0 1:1 2:1\n1.5 1:0 2:2\n", "2 labels are not whole numbers"),
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


def test_a_test_file_with_labels_the_training_file_never_uses_is_refused(tmp_path):
    train = _file(tmp_path, "0 1:1\n1 1:2\n" * 4, "train.svm")
    test = _file(tmp_path, "-1 1:1\n1 1:2\n-1 1:0\n", "test.svm")
    with pytest.raises(DataError) as caught:
        load_dataset(f"svmlight:{train},test={test}")
    message = str(caught.value)
    assert message == (f"svmlight: {test}: 2 test samples carry 1 label values that the training file {train} "
                       "never uses; label both files alike")  # fmt: skip
    ones = _file(tmp_path, "1 1:3\n", "ones.svm")
    narrower = load_dataset(f"svmlight:{train},test={ones}")
    assert narrower.classes == 2 and narrower.y_test.tolist() == [1]  # a class the test split lacks is fine


def test_whole_numbers_written_as_decimals_are_classes(tmp_path):
    path = _file(tmp_path, "2.0 1:1\n-1.0 1:2\n2 1:3\n-1 1:4\n" * 5)
    data = load_dataset(f"svmlight:{path},holdout=0.2")
    assert data.classes == 2
    assert sorted(set(data.y_train.tolist()) | set(data.y_test.tolist())) == [0, 1]


def test_an_empty_train_or_test_split_is_refused(tmp_path):
    two = _file(tmp_path, "0 1:1 2:1\n1 1:2 2:0\n")
    with pytest.raises(DataError, match="train split is empty"):
        load_dataset(f"svmlight:{two},holdout=0.9")  # each class's one sample goes to test
    with pytest.raises(DataError, match="no samples"):
        load_dataset(f"svmlight:{two},test={_file(tmp_path, '', 'empty.svm')}")


def test_a_synthetic_set_far_past_memory_is_refused_before_it_is_drawn():
    with pytest.raises(DataError, match="GiB"):
        load_dataset("synthetic:n=10000000,d=100000")
