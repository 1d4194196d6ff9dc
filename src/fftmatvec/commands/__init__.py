"""Sub-commands of the ``fftmatvec`` command line, one module each."""
