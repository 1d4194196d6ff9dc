"""Matrix and vector files compatible with the FFTMatvec C++ code (design.md section 5).

``meta``: the ``meta_adj`` text file and the shared atomic-write helper.
``hdf5``: vector files, block-row files, slab reads, checksums.
"""

from fftmatvec.io.hdf5 import (VectorInfo, data_checksum, read_attrs, read_matrix, read_matrix_slab,
                               read_vector, write_matrix, write_vector)
from fftmatvec.io.meta import (MatrixMeta, atomic_path, binary_dir, block_path, read_meta,
                               write_meta)

__all__ = ["MatrixMeta", "VectorInfo", "atomic_path", "binary_dir", "block_path",
           "data_checksum", "read_attrs", "read_matrix", "read_matrix_slab", "read_meta", "read_vector",
           "write_matrix", "write_meta", "write_vector"]
