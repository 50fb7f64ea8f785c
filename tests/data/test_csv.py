"""CSV tables: delimiter and header told from the file, the label column chosen, errors naming line and
column without quoting the file."""

from __future__ import annotations

import pytest

from adass.data import DataError, load_dataset
from adass.registry import SpecError


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


IRIS_LIKE = "length,width,species\n" + "".join(
    f"{1 + i % 3 + 0.01 * i:.2f},{0.5 * (i % 3):.1f},{('setosa', 'versicolor', 'virginica')[i % 3]}\n"
    for i in range(30)
)


def test_a_header_row_and_word_labels_in_the_last_column(tmp_path):
    data = load_dataset(f"csv:{_write(tmp_path, 'iris.csv', IRIS_LIKE)},standardize=off,holdout=0.2")
    assert data.shape == (2,) and data.classes == 3 and data.n_train + data.n_test == 30
    assert data.n_test == 6  # two of each class: the holdout is stratified
    # classes are the sorted labels: setosa 0, versicolor 1, virginica 2; width was 0.5 * class
    for x, y in zip(data.x_train.tolist(), data.y_train.tolist(), strict=True):
        assert x[1] == pytest.approx(0.5 * y)


@pytest.mark.parametrize(
    ("name", "text", "label"),
    [
        ("first.csv", "".join(f"{i % 4},{i},{2 * i}\n" for i in range(40)), "first"),  # MNIST-in-CSV style
        ("semi.csv", "a;b;y\n" + "".join(f"{i};{2 * i};{i % 4}\n" for i in range(40)), "y"),
        ("tabs.tsv", "".join(f"{i}\t{2 * i}\t{i % 4}\n" for i in range(40)), "2"),
        ("spaces.txt", "".join(f"{i}   {2 * i} {i % 4}\n" for i in range(40)), "last"),
    ],
)
def test_delimiters_and_label_columns(tmp_path, name, text, label):
    data = load_dataset(f"csv:{_write(tmp_path, name, text)},label={label},standardize=off")
    assert data.shape == (2,) and data.classes == 4 and data.n_train + data.n_test == 40
    for x, y in zip(data.x_train.tolist(), data.y_train.tolist(), strict=True):
        assert x[1] == 2 * x[0] and y == int(x[0]) % 4


def test_a_test_file_with_the_same_columns(tmp_path):
    train = _write(tmp_path, "train.csv", "x,y\n" + "".join(f"{i},{i % 2}\n" for i in range(10)))
    test = _write(tmp_path, "test.csv", "x,y\n5,1\n6,0\n")
    data = load_dataset(f"csv:{train},test={test},standardize=off")
    assert data.n_train == 10 and data.x_test.tolist() == [[5.0], [6.0]] and data.y_test.tolist() == [1, 0]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "a,b,y\n1,2,0\n3,secret,1\n4,,0\n",
            "2 cells are empty or not numbers; the first: line 3, column 1 (from 0) is not a number",
        ),
        (
            "1,2,0\n3,,1\n4,5,0\n",
            "1 cells are empty or not numbers; the first: line 2, column 1 (from 0) is empty",
        ),
        ("1,2,0\n3,4,1\n5,6,7,0\n", "Expected 3 fields in line 3, saw 4"),
        ("1,2,0.5\n3,4,1\n", "1 labels are not whole numbers"),
        ("y\n1\n0\n", "one column"),
        ("a,b,y\n", "a header and no samples"),
        ("\n\n", "no samples"),
        ("a,b,y\n1,2,\n3,4,1\n", "1 samples have an empty label"),
        ("1,inf,0\n3,4,1\n", "1 infinite feature values"),
    ],
)
def test_bad_tables_are_refused_in_one_line_quoting_nothing(tmp_path, text, said):
    with pytest.raises(DataError) as caught:
        load_dataset(f"csv:{_write(tmp_path, 'bad.csv', text)}")
    message = str(caught.value)
    assert said in message and len(message.splitlines()) == 1 and "secret" not in message
    assert "'b'" not in message  # header names are the file's content too


def test_a_label_column_that_is_not_there(tmp_path):
    path = _write(tmp_path, "iris.csv", IRIS_LIKE)
    with pytest.raises(DataError, match="label=colour names no column \\(its header has 3 names\\)"):
        load_dataset(f"csv:{path},label=colour")
    with pytest.raises(DataError, match="label=3 is not a column; the file has 3 \\(0..2\\)"):
        load_dataset(f"csv:{path},label=3")


def test_test_files_must_match_the_training_file(tmp_path):
    train = _write(tmp_path, "train.csv", "x,y\n" + "".join(f"{i},{i % 2}\n" for i in range(10)))
    other = _write(tmp_path, "other.csv", "x,z,y\n1,2,0\n")
    with pytest.raises(DataError, match="its columns differ from the training file"):
        load_dataset(f"csv:{train},test={other}")
    signs = _write(tmp_path, "signs.csv", "x,y\n1,-1\n2,1\n")
    with pytest.raises(DataError, match="1 test samples carry labels that the training file .* never uses"):
        load_dataset(f"csv:{train},test={signs}")


def test_a_missing_file_and_no_file(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_dataset(f"csv:{tmp_path / 'absent.csv'}")
    with pytest.raises((DataError, SpecError), match="csv"):
        load_dataset("csv")
