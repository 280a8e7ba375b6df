"""`torch.nn` of the stand-in torch (not PyTorch): `functional` only."""
from . import functional  # noqa: F401
