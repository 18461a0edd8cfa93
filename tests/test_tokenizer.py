import pytest
import torch

from matcomp.tokenizer import MASK_ID, VOCAB_SIZE, Tokenizer

tok = Tokenizer()


def test_paper_ids():
    values = torch.tensor([0.0, 0.44, -0.24, -1.5, 1.5, -10.0, 10.0])
    assert tok.encode(values).tolist() == [1001, 1045, 977, 851, 1151, 1, 2001]
    assert VOCAB_SIZE == 2002 and MASK_ID == 0


def test_round_trip_on_the_whole_grid():
    grid = torch.arange(-1000, 1001) / 100
    ids = tok.encode(grid)
    assert ids.tolist() == list(range(1, 2002))
    assert torch.allclose(tok.decode(ids), grid, atol=1e-6)


def test_encode_rounds_to_two_decimals():
    assert tok.encode(torch.tensor([0.444, 0.446, -0.2449])).tolist() == [1045, 1046, 977]


def test_negation_maps_every_value_to_its_negative():
    grid = torch.arange(-1000, 1001) / 100
    assert torch.equal(tok.negate(tok.encode(grid)), tok.encode(-grid))
    assert tok.negate(torch.tensor([0])).tolist() == [0]  # MASK stays MASK


def test_out_of_range_is_an_error_unless_clamped():
    with pytest.raises(ValueError, match="10.5.*outside"):
        tok.encode(torch.tensor([0.0, 10.5]))
    with pytest.raises(ValueError, match="-12"):
        tok.encode(torch.tensor([-12.0]))
    assert tok.encode(torch.tensor([-12.0, 10.5]), clamp=True).tolist() == [1, 2001]


def test_masked_encoding_and_replacement():
    values = torch.tensor([[0.5, -0.25], [1.0, 0.0]])
    observed = torch.tensor([[True, False], [False, True]])
    ids = tok.encode_masked(values, observed)
    assert ids.tolist() == [[1051, 0], [0, 1001]]
    assert tok.replace_masked(ids, 0.44).tolist() == [[1051, 1045], [1045, 1001]]
    assert tok.replace_masked(ids, -0.24).tolist() == [[1051, 977], [977, 1001]]
    assert tok.decode(ids).tolist() == [[0.5, 0.0], [0.0, 0.0]]
