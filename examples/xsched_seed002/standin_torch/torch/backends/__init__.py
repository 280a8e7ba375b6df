"""`torch.backends` of the stand-in torch (not PyTorch): `cudnn.deterministic` and `cudnn.benchmark`,
flags a script sets; the stand-in's kernels are deterministic whatever they say."""
import types

cudnn = types.SimpleNamespace(deterministic=False, benchmark=False, enabled=True)
