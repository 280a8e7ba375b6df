"""`torch.nn.functional` of the stand-in torch (not PyTorch): `conv2d` only (the package's docstring)."""
from .._tensors import conv2d  # noqa: F401
