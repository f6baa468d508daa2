"""In-process hooks that capture what PyTorch, Triton and JAX compile."""
