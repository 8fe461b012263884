"""The bytes PyTorch's autograd saves for the backward pass of five CNNs: the oracle pysim's
tensor accounting is held to (tests/test_tensors.py).

    <python with torch> bench/saved_tensors.py [--batch 2] [--out tests/data/saved_tensors.json]

Needs PyTorch (CPU is enough; no torchvision: the networks are written here from their papers,
in the layer configuration pysim's zoo gives them -- torchvision's for ResNet-50, VGG-16,
AlexNet and Inception-v3, the paper's Table 1 for GoogLeNet -- with in-place ReLUs as
torchvision has them). One training step's forward pass runs under
`torch.autograd.graph.saved_tensors_hooks`; every tensor the pack hook sees is recorded by
its storage (a view and the tensor it views, or an in-place op's output and its input, are one
storage: counted once). Parameters and buffers (weights, running statistics) are left out:
they are the training state, not stashed activations. The JSON holds, per model, the bytes of
floating-point storages and of the others (max pooling's int64 indices, dropout's masks, the
loss's targets), the parameter count (so that the test can check the architecture is the
one pysim builds), the batch, torch's version and the date.
"""
import argparse
import datetime
import os
import platform

from outputs import FORCE, check, write_json

import torch
import torch.nn as nn
import torch.nn.functional as F


# --------------------------------------------------------------------------- networks
def dropout(x, p=0.5):
    """Dropout as CUDA runs it (native_dropout: a one-byte mask saved); CPU's F.dropout
    multiplies by a float mask, which it saves in four bytes an element."""
    return torch.native_dropout(x, p, True)[0]


class Dropout(nn.Module):
    def forward(self, x):
        return dropout(x)


class BasicConv(nn.Module):
    """Convolution, optional batch normalisation, in-place ReLU."""

    def __init__(self, cin, cout, k, s=1, p=0, bn=True, eps=1e-5):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, s, p, bias=not bn)
        self.bn = nn.BatchNorm2d(cout, eps=eps) if bn else None

    def forward(self, x):
        x = self.conv(x)
        if self.bn is not None:
            x = self.bn(x)
        return F.relu(x, inplace=True)


class Bottleneck(nn.Module):
    """He et al.'s bottleneck, v1.5 (stride in the 3x3)."""

    def __init__(self, cin, width, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, 4 * width, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(4 * width)
        self.down = None
        if stride != 1 or cin != 4 * width:
            self.down = nn.Sequential(nn.Conv2d(cin, 4 * width, 1, stride, bias=False),
                                      nn.BatchNorm2d(4 * width))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)), inplace=True)
        y = F.relu(self.bn2(self.conv2(y)), inplace=True)
        y = self.bn3(self.conv3(y))
        s = self.down(x) if self.down is not None else x
        return F.relu(y + s, inplace=True)


class ResNet50(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        blocks, cin = [], 64
        for stage, (n, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
            for b in range(n):
                blocks.append(Bottleneck(cin, width, 2 if (b == 0 and stage > 0) else 1))
                cin = 4 * width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)), inplace=True)
        x = F.max_pool2d(x, 3, 2, 1)
        x = self.blocks(x)
        x = F.adaptive_avg_pool2d(x, 1)
        return self.fc(torch.flatten(x, 1))


class VGG16(nn.Module):
    """Configuration D; classifier Linear, ReLU, Dropout, Linear, ReLU, Dropout, Linear;
    adaptive average pooling to 7 x 7 before it."""

    CONFIG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
              512, 512, 512, "M")

    def __init__(self, classes=1000):
        super().__init__()
        layers, cin = [], 3
        for v in self.CONFIG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, v, 3, 1, 1), nn.ReLU(inplace=True)]
                cin = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(inplace=True), Dropout(),
            nn.Linear(4096, 4096), nn.ReLU(inplace=True), Dropout(),
            nn.Linear(4096, classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 7)
        return self.classifier(torch.flatten(x, 1))


class AlexNet(nn.Module):
    """The single-tower AlexNet (arXiv:1404.5997): 64, 192, 384, 256, 256 channels;
    classifier Dropout, Linear, ReLU, Dropout, Linear, ReLU, Linear; adaptive average pooling
    to 6 x 6 before it."""

    def __init__(self, classes=1000):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2))
        self.classifier = nn.Sequential(
            Dropout(), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            Dropout(), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 6)
        return self.classifier(torch.flatten(x, 1))


class InceptionV1(nn.Module):
    def __init__(self, cin, n1, r3, n3, r5, n5, pp):
        super().__init__()
        self.b1 = BasicConv(cin, n1, 1, bn=False)
        self.b2 = nn.Sequential(BasicConv(cin, r3, 1, bn=False),
                                BasicConv(r3, n3, 3, 1, 1, bn=False))
        self.b3 = nn.Sequential(BasicConv(cin, r5, 1, bn=False),
                                BasicConv(r5, n5, 5, 1, 2, bn=False))
        self.b4 = BasicConv(cin, pp, 1, bn=False)

    def forward(self, x):
        d = self.b4(F.max_pool2d(x, 3, 1, 1))
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), d], 1)


class GoogLeNet(nn.Module):
    """Szegedy et al., CVPR 2015, Table 1: convolutions with bias and in-place ReLU, no
    batch normalisation, no local response normalisation, no auxiliary classifiers; max
    pooling rounded up; 40% dropout before the classifier."""

    MODULES = [("3a", 192, (64, 96, 128, 16, 32, 32)), ("3b", 256, (128, 128, 192, 32, 96, 64)),
               ("pool",), ("4a", 480, (192, 96, 208, 16, 48, 64)),
               ("4b", 512, (160, 112, 224, 24, 64, 64)), ("4c", 512, (128, 128, 256, 24, 64, 64)),
               ("4d", 512, (112, 144, 288, 32, 64, 64)),
               ("4e", 528, (256, 160, 320, 32, 128, 128)), ("pool",),
               ("5a", 832, (256, 160, 320, 32, 128, 128)),
               ("5b", 832, (384, 192, 384, 48, 128, 128))]

    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = BasicConv(3, 64, 7, 2, 3, bn=False)
        self.conv2_reduce = BasicConv(64, 64, 1, bn=False)
        self.conv2 = BasicConv(64, 192, 3, 1, 1, bn=False)
        self.mods = nn.ModuleList([InceptionV1(m[1], *m[2]) if len(m) > 1 else nn.Identity()
                                   for m in self.MODULES])
        self.pools = [len(m) == 1 for m in self.MODULES]
        self.fc = nn.Linear(1024, classes)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 3, 2, ceil_mode=True)
        x = F.max_pool2d(self.conv2(self.conv2_reduce(x)), 3, 2, ceil_mode=True)
        for pool, m in zip(self.pools, self.mods):
            x = F.max_pool2d(x, 3, 2, ceil_mode=True) if pool else m(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(dropout(x, 0.4))


def bcr(cin, cout, k, s=1, p=0):
    return BasicConv(cin, cout, k, s, p, bn=True, eps=0.001)


class InceptionA(nn.Module):
    def __init__(self, cin, pool_features):
        super().__init__()
        self.b1 = bcr(cin, 64, 1)
        self.b5 = nn.Sequential(bcr(cin, 48, 1), bcr(48, 64, 5, 1, 2))
        self.b3 = nn.Sequential(bcr(cin, 64, 1), bcr(64, 96, 3, 1, 1), bcr(96, 96, 3, 1, 1))
        self.bp = bcr(cin, pool_features, 1)

    def forward(self, x):
        return torch.cat([self.b1(x), self.b5(x), self.b3(x),
                          self.bp(F.avg_pool2d(x, 3, 1, 1))], 1)


class InceptionB(nn.Module):
    def __init__(self, cin):
        super().__init__()
        self.b3 = bcr(cin, 384, 3, 2)
        self.bd = nn.Sequential(bcr(cin, 64, 1), bcr(64, 96, 3, 1, 1), bcr(96, 96, 3, 2))

    def forward(self, x):
        return torch.cat([self.b3(x), self.bd(x), F.max_pool2d(x, 3, 2)], 1)


class InceptionC(nn.Module):
    def __init__(self, cin, c7):
        super().__init__()
        self.b1 = bcr(cin, 192, 1)
        self.b7 = nn.Sequential(bcr(cin, c7, 1), bcr(c7, c7, (1, 7), 1, (0, 3)),
                                bcr(c7, 192, (7, 1), 1, (3, 0)))
        self.bd = nn.Sequential(bcr(cin, c7, 1), bcr(c7, c7, (7, 1), 1, (3, 0)),
                                bcr(c7, c7, (1, 7), 1, (0, 3)), bcr(c7, c7, (7, 1), 1, (3, 0)),
                                bcr(c7, 192, (1, 7), 1, (0, 3)))
        self.bp = bcr(cin, 192, 1)

    def forward(self, x):
        return torch.cat([self.b1(x), self.b7(x), self.bd(x),
                          self.bp(F.avg_pool2d(x, 3, 1, 1))], 1)


class InceptionD(nn.Module):
    def __init__(self, cin):
        super().__init__()
        self.b3 = nn.Sequential(bcr(cin, 192, 1), bcr(192, 320, 3, 2))
        self.b7 = nn.Sequential(bcr(cin, 192, 1), bcr(192, 192, (1, 7), 1, (0, 3)),
                                bcr(192, 192, (7, 1), 1, (3, 0)), bcr(192, 192, 3, 2))

    def forward(self, x):
        return torch.cat([self.b3(x), self.b7(x), F.max_pool2d(x, 3, 2)], 1)


class InceptionE(nn.Module):
    def __init__(self, cin):
        super().__init__()
        self.b1 = bcr(cin, 320, 1)
        self.b3_1 = bcr(cin, 384, 1)
        self.b3_2a = bcr(384, 384, (1, 3), 1, (0, 1))
        self.b3_2b = bcr(384, 384, (3, 1), 1, (1, 0))
        self.bd_1 = bcr(cin, 448, 1)
        self.bd_2 = bcr(448, 384, 3, 1, 1)
        self.bd_3a = bcr(384, 384, (1, 3), 1, (0, 1))
        self.bd_3b = bcr(384, 384, (3, 1), 1, (1, 0))
        self.bp = bcr(cin, 192, 1)

    def forward(self, x):
        b = self.b3_1(x)
        b = torch.cat([self.b3_2a(b), self.b3_2b(b)], 1)
        d = self.bd_2(self.bd_1(x))
        d = torch.cat([self.bd_3a(d), self.bd_3b(d)], 1)
        return torch.cat([self.b1(x), b, d, self.bp(F.avg_pool2d(x, 3, 1, 1))], 1)


class InceptionV3(nn.Module):
    """Szegedy et al., CVPR 2016, in torchvision's layer configuration without the auxiliary
    classifier (aux_logits=False) and without input transformation."""

    def __init__(self, classes=1000):
        super().__init__()
        self.stem1 = nn.Sequential(bcr(3, 32, 3, 2), bcr(32, 32, 3), bcr(32, 64, 3, 1, 1))
        self.stem2 = nn.Sequential(bcr(64, 80, 1), bcr(80, 192, 3))
        self.mixed = nn.Sequential(
            InceptionA(192, 32), InceptionA(256, 64), InceptionA(288, 64), InceptionB(288),
            InceptionC(768, 128), InceptionC(768, 160), InceptionC(768, 160),
            InceptionC(768, 192), InceptionD(768), InceptionE(1280), InceptionE(2048))
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = F.max_pool2d(self.stem1(x), 3, 2)
        x = F.max_pool2d(self.stem2(x), 3, 2)
        x = self.mixed(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(dropout(x, 0.5))


NETWORKS = {"resnet50": (ResNet50, 224), "vgg16": (VGG16, 224), "alexnet": (AlexNet, 224),
            "googlenet": (GoogLeNet, 224), "inception_v3": (InceptionV3, 299)}


# --------------------------------------------------------------------------- measurement
def measure(name, batch, seed=0):
    cls, image = NETWORKS[name]
    torch.manual_seed(seed)
    net = cls().train()
    state = {t.untyped_storage().data_ptr() for t in list(net.parameters()) +
             list(net.buffers())}
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr not in state:
            key = (ptr, str(t.dtype))
            seen[key] = max(seen.get(key, 0), st.nbytes())
        return t

    x = torch.randn(batch, 3, image, image)
    target = torch.randint(0, 1000, (batch,))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = F.cross_entropy(net(x), target)
    loss.backward()             # the graph is whole: every saved tensor is used
    floating = sum(b for (_, dt), b in seen.items() if "float" in dt)
    other = {}
    for (_, dt), b in seen.items():
        if "float" not in dt:
            other[dt] = other.get(dt, 0) + b
    return dict(params=sum(p.numel() for p in net.parameters()), image=image, batch=batch,
                storages=len(seen), float_bytes=floating, other_bytes=other,
                total_bytes=floating + sum(other.values()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "tests", "data",
                                                  "saved_tensors.json"))
    ap.add_argument("--force", action="store_true", help=FORCE)
    a = ap.parse_args()
    check(ap, a.force, [("--out", a.out)])
    torch.backends.mkldnn.enabled = False      # the reference kernels' saved tensors
    out = {"provenance": {"torch": torch.__version__, "python": platform.python_version(),
                          "date": datetime.date.today().isoformat(), "device": "cpu",
                          "mkldnn": False, "dtype": "float32",
                          "script": "bench/saved_tensors.py",
                          "what": "bytes of the distinct storages autograd's pack hook saw "
                                  "in one forward pass (parameters and buffers left out)"},
           "models": {}}
    for name in NETWORKS:
        r = measure(name, a.batch)
        out["models"][name] = r
        print(f"{name:14s} params {r['params']:>11,}  saved {r['total_bytes']:>13,} B "
              f"(float {r['float_bytes']:,}, other {r['other_bytes']})  "
              f"storages {r['storages']}")
    write_json(a.out, out, quiet=True, end="\n")
    print("written", os.path.relpath(a.out))


if __name__ == "__main__":
    main()
