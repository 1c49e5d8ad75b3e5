"""Ultra-high dimensional sparse representations: winner-take-all layers and binarisation (uhd-bert)."""

from model.sparse.binary import SparseVector, binarize, to_sparse
from model.sparse.wta import WinnerTakeAll, masked_max_pool, pooled_winners, winner_take_all

__all__ = [
    "SparseVector",
    "WinnerTakeAll",
    "binarize",
    "masked_max_pool",
    "pooled_winners",
    "to_sparse",
    "winner_take_all",
]
