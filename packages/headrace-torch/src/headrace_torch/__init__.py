"""headrace-torch: PyTorch iterators over headrace pipelines, with DALI's arguments and last-batch semantics.

    from headrace_torch import GenericIterator, LastBatchPolicy   # or: from headrace.plugin.pytorch import ...
"""

from headrace_torch.distributed import shard_args
from headrace_torch.epoch import LastBatchPolicy
from headrace_torch.functions import TorchPythonFunction
from headrace_torch.iterator import ClassificationIterator, GenericIterator
from headrace_torch.ragged import RaggedIterator
from headrace_torch.tensors import feed_ndarray, to_torch, to_torch_type

DALIGenericIterator = GenericIterator
DALIClassificationIterator = ClassificationIterator
DALIRaggedIterator = RaggedIterator

__all__ = ["ClassificationIterator", "DALIClassificationIterator", "DALIGenericIterator", "DALIRaggedIterator",
           "GenericIterator", "LastBatchPolicy", "RaggedIterator", "TorchPythonFunction", "feed_ndarray", "shard_args",
           "to_torch", "to_torch_type"]
