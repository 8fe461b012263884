"""Convolutional networks for images, each built from its paper's architecture.

Convolutions followed by batch normalisation have no bias (as the papers' reference
implementations and torchvision build them). Every classifier ends with a cross-entropy loss
over its classes.
"""
from __future__ import annotations

from pysim.models.model import Net
from pysim.models.registry import check_choice, check_int, register


def _conv_bn_relu(net, x, name, out, k, s=1, p=0, relu=True):
    x = net.conv(x, f"{name}", out, k, s, p, bias=False)
    x = net.norm(x, f"{name}.bn")
    return net.act(x, f"{name}.relu") if relu else x


def _classifier_input(name, image):
    check_int(name, "image", image, 32)
    return (3, image, image)


# --------------------------------------------------------------------------- ResNet
def _bottleneck(net, x, name, width, stride, downsample, v1):
    """He et al.'s bottleneck block: 1x1 (width), 3x3 (width), 1x1 (4 x width), the shortcut
    added before the last ReLU. v1 strides in the first 1x1 convolution, v1.5 (torchvision,
    MLPerf) in the 3x3."""
    s1, s2 = (stride, 1) if v1 else (1, stride)
    y = _conv_bn_relu(net, x, f"{name}.conv1", width, 1, s1)
    y = _conv_bn_relu(net, y, f"{name}.conv2", width, 3, s2, 1)
    y = _conv_bn_relu(net, y, f"{name}.conv3", 4 * width, 1, relu=False)
    if downsample:
        x = _conv_bn_relu(net, x, f"{name}.downsample", 4 * width, 1, stride, relu=False)
    y = net.add([y, x], f"{name}.add")
    return net.act(y, f"{name}.relu")


def _resnet(name, blocks, image, classes, variant, source):
    check_choice(name, "variant", variant, ("v1", "v1.5"))
    check_int(name, "classes", classes)
    net = Net()
    shape = _classifier_input(name, image)
    x = net.input(shape)
    x = _conv_bn_relu(net, x, "conv1", 64, 7, 2, 3)
    x = net.pool(x, "maxpool", 3, 2, 1)
    inplanes = 64
    for stage, (n, width) in enumerate(zip(blocks, (64, 128, 256, 512)), start=1):
        for b in range(n):
            stride = 2 if (b == 0 and stage > 1) else 1
            down = b == 0 and (stride != 1 or inplanes != 4 * width)
            x = _bottleneck(net, x, f"layer{stage}.{b}", width, stride, down, variant == "v1")
            inplanes = 4 * width
    x = net.pool(x, "avgpool", op="avg")
    x = net.linear(net.flatten(x), "fc", classes)
    net.loss(x)
    return net.model(name, input_shape=shape, source=source)


RESNET_SOURCE = ("He, Zhang, Ren, Sun: Deep Residual Learning for Image Recognition, CVPR 2016 "
                 "(Table 1); v1.5 strides in the 3x3 convolution, as torchvision and MLPerf do")


@register("resnet50")
def resnet50(image=224, classes=1000, variant="v1.5"):
    """ResNet-50: bottleneck blocks 3, 4, 6, 3."""
    return _resnet("resnet50", (3, 4, 6, 3), image, classes, variant, RESNET_SOURCE)


@register("resnet152")
def resnet152(image=224, classes=1000, variant="v1.5"):
    """ResNet-152: bottleneck blocks 3, 8, 36, 3."""
    return _resnet("resnet152", (3, 8, 36, 3), image, classes, variant, RESNET_SOURCE)
