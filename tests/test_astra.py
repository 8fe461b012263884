"""ASTRA-sim 1.0 text workloads, from small files written here by hand."""
import pytest

from pysim import models
from pysim.models import ModelError

DATA = """DATA
3
conv1\t-1\t100\tNONE\t0\t120\tNONE\t0\t140\tALLREDUCE\t37632\t10
fc1  -1  50 NONE 0  60 NONE 0  70 ALLREDUCE 8192000 5

fc2\t-1\t5\tALLGATHER\t64\t6\tREDUCESCATTER\t128\t7\tNONE\t0\t1\t\t\t
"""


def write(tmp_path, text, name="w.txt"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_data_parallel_workload(tmp_path):
    m = models.load(write(tmp_path, DATA, "resnet_like.txt"))
    assert m.given_times and m.parallelism == "DATA" and m.name == "resnet_like"
    assert [l.name for l in m.layers] == ["conv1", "fc1", "fc2"]
    assert all(l.kind == "given" for l in m.layers)
    g = m.layers[0].given
    assert (g["fwd_cycles"], g["ig_cycles"], g["wg_cycles"], g["update_cycles"]) == \
        (100, 120, 140, 10)
    assert g["fwd_comm"] == ("NONE", 0) and g["wg_comm"] == ("ALLREDUCE", 37632)
    assert g["reserved"] == -1
    g = m.layers[2].given
    assert g["fwd_comm"] == ("ALLGATHER", 64) and g["ig_comm"] == ("REDUCESCATTER", 128)
    assert m.params == 0 and m.fwd_flops == 0
    assert m.to_dict()["parallelism"] == "DATA"


def test_hybrid_headers(tmp_path):
    t = write(tmp_path, "HYBRID_TRANSFORMER\tmodel_parallel_NPU_group: 4\n1\n"
                        "Q1 -1 3 NONE 0 2 ALLREDUCE 8 2 ALLREDUCE 33 10\n")
    m = models.load(t)
    assert m.parallelism == "HYBRID_TRANSFORMER"
    assert m.config == {"model_parallel_npu_group": 4}
    d = write(tmp_path, "HYBRID_DLRM 4\n1\nEmbedding -1 300 ALLTOALL 98304 300 ALLTOALL "
                        "98304 300 NONE 0 98\n", "d.txt")
    m = models.load(d)
    assert m.config == {"dlrm_last_bottom_layer": 4}
    assert m.layers[0].given["fwd_comm"] == ("ALLTOALL", 98304)
    f = write(tmp_path, "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 "
                        "checkpoints: 2 0 1 checkpoint_initiates: 1 1\n2\n"
                        "a -1 1 NONE 0 1 NONE 0 1 NONE 0 1\nb -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n",
              "f.txt")
    assert models.load(f).config == {"model_parallel_npu_group": 2, "checkpoints": [0, 1],
                                     "checkpoint_initiates": [1]}
    c = write(tmp_path, "HYBRID_CUSTOMIZED\n1\nmlp0 -1 5 ALLGATHER 8 5 REDUCESCATTER 8 5 "
                        "ALLREDUCE 8 3 HYBRID_DATA_MODEL\n", "c.txt")
    assert models.load(c).layers[0].given["parallelism"] == "HYBRID_DATA_MODEL"


@pytest.mark.parametrize("text,message", [
    ("DATAA\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n",
     "line 1: parallelism 'DATAA' unknown (did you mean 'DATA'?)"),
    ("DATA\n2\na -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n",
     "line 3: the file ends after 1 of the 2 layers line 2 announces"),
    ("DATA\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 1\nb -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n",
     "line 4: more layers than the 1 line 2 announces"),
    ("DATA\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0\n", "line 3: 11 fields, expected 12"),
    ("DATA\n1\na -1 1 NONE 0 1 ALLREDUCES 0 1 NONE 0 1\n",
     "line 3: ig collective 'ALLREDUCES'"),
    ("DATA\n1\na -1 1 NONE 0 x NONE 0 1 NONE 0 1\n", "line 3: ig compute cycles = 'x'"),
    ("DATA\n1\na -1 -5 NONE 0 1 NONE 0 1 NONE 0 1\n", "line 3: fwd compute cycles = -5"),
    ("DATA\nten\n", "line 2: the number of layers = 'ten'"),
    ("DATA\n", "expected the parallelism on the first line"),
    ("HYBRID_TRANSFORMER\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n",
     "line 1: expected 'model_parallel_NPU_group:' after HYBRID_TRANSFORMER"),
])
def test_malformed_files_name_the_line(tmp_path, text, message):
    with pytest.raises(ModelError) as e:
        models.load(write(tmp_path, text))
    assert message in str(e.value)


def test_repeated_names_are_numbered(tmp_path):
    line = "a -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n"
    m = models.load(write(tmp_path, "DATA\n3\n" + line * 3))
    assert [l.name for l in m.layers] == ["a", "a#2", "a#3"]


def test_missing_and_binary_files(tmp_path):
    with pytest.raises(ModelError, match="no such file"):
        models.load(str(tmp_path / "nope.txt"))
    p = tmp_path / "b.txt"
    p.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ModelError, match="not UTF-8"):
        models.load(str(p))
    with pytest.raises(ModelError, match="takes no parameters"):
        models.load(write(tmp_path, DATA), batch=3)
