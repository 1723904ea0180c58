"""The honest CPU matmul candidate that the hostile and worker-ending tests turn into attacks."""

MATMUL_HEADER = "import torch\nfrom torch import nn\n"
_MATMUL = """
class ModelNew(nn.Module):
    def forward(self, A, B):
        out = torch.zeros(A.shape[0], B.shape[1])
        for k in range(0, A.shape[1], 32):
            out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
        {before_return}
        return out
"""


def honest_matmul(before_return: str = "") -> str:
    """The candidate's class; `before_return` (source, one statement per line) runs inside its
    forward after the right answer is computed."""
    return _MATMUL.replace("{before_return}", before_return.replace("\n", "\n        "))
