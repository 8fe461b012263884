"""Convolutional networks for images, each built from its paper's architecture.

Convolutions followed by batch normalisation have no bias (as the papers' reference
implementations and torchvision build them); ReLUs run in place (torchvision's
`ReLU(inplace=True)`: the ReLU's output is its input's tensor). Every classifier ends with a
cross-entropy loss over its classes.
"""
from __future__ import annotations

from pysim.errors import ModelError
from pysim.models.model import Net
from pysim.models.registry import check_choice, check_int, register


def _conv_bn_relu(net, x, name, out, k, s=1, p=0, relu=True):
    x = net.conv(x, f"{name}", out, k, s, p, bias=False)
    x = net.norm(x, f"{name}.bn")
    return net.act(x, f"{name}.relu", inplace=True) if relu else x


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
    return net.act(y, f"{name}.relu", inplace=True)


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


@register("resnet200")
def resnet200(image=224, classes=1000, variant="v1.5"):
    """ResNet-200 (He et al., "Identity Mappings in Deep Residual Networks", ECCV 2016):
    bottleneck blocks 3, 24, 36, 3."""
    return _resnet("resnet200", (3, 24, 36, 3), image, classes, variant, RESNET_SOURCE)


@register("resnet152")
def resnet152(image=224, classes=1000, variant="v1.5"):
    """ResNet-152: bottleneck blocks 3, 8, 36, 3."""
    return _resnet("resnet152", (3, 8, 36, 3), image, classes, variant, RESNET_SOURCE)


# --------------------------------------------------------------------------- CIFAR ResNets
def _preact(net, x, name):
    """Batch norm and an in-place ReLU: the pre-activation of He et al.'s identity-mapping
    units."""
    x = net.norm(x, f"{name}.bn")
    return net.act(x, f"{name}.relu", inplace=True)


def _preact_unit(net, x, name, convs, out, stride, project):
    """A pre-activation residual unit (He et al., ECCV 2016, Fig. 4(e)): per convolution
    (channels, kernel) batch norm, ReLU and the convolution (the first 3x3 one strides),
    and the input added. Where the shape changes, a 1x1 projection of the first
    pre-activation is the shortcut (as the authors' code shares it between both paths);
    else the unit's input is."""
    y = _preact(net, x, f"{name}.pre1")
    shortcut = (net.conv(y, f"{name}.shortcut", out, 1, stride, bias=False)
                if project else x)
    for k, (ch, ks) in enumerate(convs, start=1):
        if k > 1:
            y = _preact(net, y, f"{name}.pre{k}")
        st = stride if ks == 3 else 1
        if ks == 3:
            stride = 1                         # the first 3x3 convolution strides
        y = net.conv(y, f"{name}.conv{k}", ch, ks, st, ks // 2, bias=False)
    return net.add([y, shortcut], f"{name}.add")


def _cifar_resnet(name, units, widths, convs, classes, source):
    """A CIFAR residual network of pre-activation units: a 3x3 convolution of 16 channels,
    three stages of `units` units (outputs `widths`, strides 1, 2, 2), a final batch norm
    and ReLU, global average pooling and a linear classifier; 32 x 32 inputs."""
    check_int(name, "classes", classes)
    shape = (3, 32, 32)
    net = Net()
    x = net.input(shape)
    x = net.conv(x, "conv1", 16, 3, 1, 1, bias=False)
    channels = 16
    for stage, width in enumerate(widths, start=1):
        for u in range(units):
            stride = 2 if (u == 0 and stage > 1) else 1
            x = _preact_unit(net, x, f"stage{stage}.{u}", convs(width), width, stride,
                             u == 0 and (stride != 1 or channels != width))
            channels = width
    x = _preact(net, x, "final")
    x = net.pool(x, "avgpool", op="avg")
    x = net.linear(net.flatten(x), "fc", classes)
    net.loss(x)
    return net.model(name, input_shape=shape, source=source)


@register("resnet1001")
def resnet1001(classes=10, depth=1001):
    """Pre-activation ResNet-1001 for CIFAR (He, Zhang, Ren, Sun: Identity Mappings in Deep
    Residual Networks, ECCV 2016, Table 2; 10.2 M parameters): (depth - 2) / 9 bottleneck
    units per stage (111 at depth 1001), each 1x1 (w), 3x3 (w), 1x1 (4 w) with w = 16, 32,
    64."""
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 11 or (depth - 2) % 9:
        raise ModelError(f"model 'resnet1001': depth = {depth!r}: expected 9 n + 2 for a "
                         f"positive integer n (164, 1001, ...)")
    return _cifar_resnet(f"resnet{depth}" if depth != 1001 else "resnet1001",
                         (depth - 2) // 9, (64, 128, 256),
                         lambda w: ((w // 4, 1), (w // 4, 3), (w, 1)), classes,
                         "He, Zhang, Ren, Sun: Identity Mappings in Deep Residual Networks, "
                         "ECCV 2016 (pre-activation bottleneck units, CIFAR)")


@register("wrn28_10")
def wrn28_10(classes=10, depth=28, widen=10):
    """Wide residual network WRN-28-10 (Zagoruyko, Komodakis: Wide Residual Networks, BMVC
    2016, Table 1; 36.5 M parameters): (depth - 4) / 6 basic pre-activation units per
    stage (4 at depth 28), two 3x3 convolutions each, widths 16, 32, 64 times `widen`; no
    dropout."""
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 10 or (depth - 4) % 6:
        raise ModelError(f"model 'wrn28_10': depth = {depth!r}: expected 6 n + 4 for a "
                         f"positive integer n (16, 28, 40, ...)")
    check_int("wrn28_10", "widen", widen)
    return _cifar_resnet("wrn28_10" if (depth, widen) == (28, 10) else
                         f"wrn{depth}_{widen}", (depth - 4) // 6,
                         tuple(w * widen for w in (16, 32, 64)),
                         lambda w: ((w, 3), (w, 3)), classes,
                         "Zagoruyko, Komodakis: Wide Residual Networks, BMVC 2016 "
                         "(pre-activation basic units, CIFAR)")


# --------------------------------------------------------------------------- AlexNet, VGG
def _mlp_head(net, x, widths, classes, dropout="before"):
    """Fully connected layers with in-place ReLUs, dropout before each hidden layer
    ("before": AlexNet) or after its ReLU ("after": torchvision's VGG)."""
    for i, w in enumerate(widths):
        if dropout == "before":
            x = net.act(x, f"classifier.dropout{i}", "dropout")
        x = net.linear(x, f"classifier.fc{i}", w)
        x = net.act(x, f"classifier.relu{i}", inplace=True)
        if dropout == "after":
            x = net.act(x, f"classifier.dropout{i}", "dropout")
    return net.linear(x, f"classifier.fc{len(widths)}", classes)


@register("alexnet")
def alexnet(image=224, classes=1000):
    """AlexNet as one tower (Krizhevsky, "One weird trick for parallelizing convolutional
    neural networks", arXiv:1404.5997, 2014; torchvision's alexnet): five convolutions
    (64, 192, 384, 256, 256 channels) and three fully connected layers, dropout before the
    first two."""
    name = "alexnet"
    check_int(name, "classes", classes)
    shape = _classifier_input(name, image)
    net = Net()
    x = net.input(shape)
    for i, (out, k, s, p, pool) in enumerate([(64, 11, 4, 2, True), (192, 5, 1, 2, True),
                                              (384, 3, 1, 1, False), (256, 3, 1, 1, False),
                                              (256, 3, 1, 1, True)]):
        x = net.conv(x, f"conv{i + 1}", out, k, s, p)
        x = net.act(x, f"relu{i + 1}", inplace=True)
        if pool:
            x = net.pool(x, f"pool{i + 1}", 3, 2)
    if x.shape[1:] != (6, 6):       # torchvision's adaptive average pooling to 6 x 6
        raise_shape(name, x.shape, (256, 6, 6), "the classifier takes 256 x 6 x 6")
    x = net.pool(x, "avgpool", 1, 1, op="avg")      # (6 x 6 to 6 x 6: a copy, kept input)
    x = _mlp_head(net, net.flatten(x), (4096, 4096), classes)
    net.loss(x)
    return net.model(name, input_shape=shape,
                     source="Krizhevsky, Sutskever, Hinton: ImageNet Classification with Deep "
                            "Convolutional Neural Networks, NIPS 2012; single-tower version: "
                            "Krizhevsky, arXiv:1404.5997, 2014")


@register("caffenet")
def caffenet(image=227, classes=1000):
    """CaffeNet, the BVLC reference model of Caffe (Jia et al., "Caffe: Convolutional
    Architecture for Fast Feature Embedding", ACM MM 2014; bvlc_reference_caffenet): AlexNet's
    two-tower layout as one network -- 96, 256, 384, 384, 256 channels, the second, fourth and
    fifth convolutions in two groups, pooling before normalisation -- and three fully
    connected layers, dropout before the first two. Local response normalisation is left out
    (no parameters, a few FLOPs per element), as in googlenet."""
    name = "caffenet"
    check_int(name, "classes", classes)
    shape = _classifier_input(name, image)
    net = Net()
    x = net.input(shape)
    for i, (out, k, s, p, g, pool) in enumerate([(96, 11, 4, 0, 1, True),
                                                 (256, 5, 1, 2, 2, True),
                                                 (384, 3, 1, 1, 1, False),
                                                 (384, 3, 1, 1, 2, False),
                                                 (256, 3, 1, 1, 2, True)]):
        x = net.conv(x, f"conv{i + 1}", out, k, s, p, groups=g)
        x = net.act(x, f"relu{i + 1}", inplace=True)
        if pool:
            x = net.pool(x, f"pool{i + 1}", 3, 2)
    if x.shape[1:] != (6, 6):
        raise_shape(name, x.shape, (256, 6, 6), "the classifier takes 256 x 6 x 6")
    x = _mlp_head(net, net.flatten(x), (4096, 4096), classes)
    net.loss(x)
    return net.model(name, input_shape=shape,
                     source="Jia et al.: Caffe, ACM MM 2014 (bvlc_reference_caffenet); "
                            "Krizhevsky, Sutskever, Hinton, NIPS 2012")


def raise_shape(model, got, want, why):
    raise ModelError(f"model {model!r}: features of shape {got}, expected {want}: {why} "
                     f"(choose another image size)")


VGG16_CONFIG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
                512, 512, 512, "M")


@register("vgg16")
def vgg16(image=224, classes=1000):
    """VGG-16, configuration D of Simonyan and Zisserman (ICLR 2015, Table 1): thirteen 3x3
    convolutions in five stages, each ending in 2x2 max pooling, and three fully connected
    layers (4096, 4096, classes), each hidden one followed by dropout (as torchvision's)."""
    name = "vgg16"
    check_int(name, "classes", classes)
    shape = _classifier_input(name, image)
    net = Net()
    x = net.input(shape)
    stage, conv = 1, 1
    for v in VGG16_CONFIG:
        if v == "M":
            x = net.pool(x, f"pool{stage}", 2, 2)
            stage, conv = stage + 1, 1
        else:
            x = net.conv(x, f"conv{stage}_{conv}", v, 3, 1, 1)
            x = net.act(x, f"relu{stage}_{conv}", inplace=True)
            conv += 1
    if x.shape[1:] != (7, 7):       # the classifier's first layer takes 512 x 7 x 7
        raise_shape(name, x.shape, (512, 7, 7), "the classifier takes 512 x 7 x 7")
    x = net.pool(x, "avgpool", 1, 1, op="avg")      # torchvision's adaptive pooling to 7 x 7
    x = _mlp_head(net, net.flatten(x), (4096, 4096), classes, dropout="after")
    net.loss(x)
    return net.model(name, input_shape=shape,
                     source="Simonyan, Zisserman: Very Deep Convolutional Networks for "
                            "Large-Scale Image Recognition, ICLR 2015 (configuration D)")


# --------------------------------------------------------------------------- GoogLeNet
# Szegedy et al., CVPR 2015, Table 1: #1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj
GOOGLENET_MODULES = {
    "3a": (64, 96, 128, 16, 32, 32), "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64), "4b": (160, 112, 224, 24, 64, 64),
    "4c": (128, 128, 256, 24, 64, 64), "4d": (112, 144, 288, 32, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128), "5a": (256, 160, 320, 32, 128, 128),
    "5b": (384, 192, 384, 48, 128, 128),
}


def _relu_conv(net, x, name, out, k, s=1, p=0):
    x = net.conv(x, name, out, k, s, p)
    return net.act(x, f"{name}.relu", inplace=True)


def _inception_v1(net, x, name, spec):
    n1, r3, n3, r5, n5, pp = spec
    a = _relu_conv(net, x, f"{name}.1x1", n1, 1)
    b = _relu_conv(net, x, f"{name}.3x3_reduce", r3, 1)
    b = _relu_conv(net, b, f"{name}.3x3", n3, 3, 1, 1)
    c = _relu_conv(net, x, f"{name}.5x5_reduce", r5, 1)
    c = _relu_conv(net, c, f"{name}.5x5", n5, 5, 1, 2)
    d = net.pool(x, f"{name}.pool", 3, 1, 1)
    d = _relu_conv(net, d, f"{name}.pool_proj", pp, 1)
    return net.concat([a, b, c, d], f"{name}.concat")


@register("googlenet")
def googlenet(image=224, classes=1000):
    """GoogLeNet (Inception v1) as Table 1 of Szegedy et al. (CVPR 2015) defines it, without
    the auxiliary classifiers used only in training and without local response
    normalisation: nine inception modules, max pooling (rounded up, as in the reference
    implementation) between the stages, global average pooling, 40% dropout and one fully
    connected layer."""
    name = "googlenet"
    check_int(name, "classes", classes)
    shape = _classifier_input(name, image)
    net = Net()
    x = net.input(shape)
    x = _relu_conv(net, x, "conv1", 64, 7, 2, 3)
    x = net.pool(x, "pool1", 3, 2, ceil_mode=True)
    x = _relu_conv(net, x, "conv2_reduce", 64, 1)
    x = _relu_conv(net, x, "conv2", 192, 3, 1, 1)
    x = net.pool(x, "pool2", 3, 2, ceil_mode=True)
    for m in ("3a", "3b", "pool3", "4a", "4b", "4c", "4d", "4e", "pool4", "5a", "5b"):
        if m.startswith("pool"):
            x = net.pool(x, m, 3, 2, ceil_mode=True)
        else:
            x = _inception_v1(net, x, f"inception{m}", GOOGLENET_MODULES[m])
    x = net.pool(x, "avgpool", op="avg")
    x = net.act(net.flatten(x), "dropout", "dropout")
    x = net.linear(x, "fc", classes)
    net.loss(x)
    return net.model(name, input_shape=shape,
                     source="Szegedy et al.: Going Deeper with Convolutions, CVPR 2015 "
                            "(Table 1)")


# --------------------------------------------------------------------------- Inception v3
def _bcr(net, x, name, out, k, s=1, p=0):
    """Inception v3's basic unit: convolution (no bias), batch norm, ReLU."""
    return _conv_bn_relu(net, x, name, out, k, s, p)


def _inception_a(net, x, n, pool_features):
    a = _bcr(net, x, f"{n}.branch1x1", 64, 1)
    b = _bcr(net, x, f"{n}.branch5x5_1", 48, 1)
    b = _bcr(net, b, f"{n}.branch5x5_2", 64, 5, 1, 2)
    c = _bcr(net, x, f"{n}.branch3x3dbl_1", 64, 1)
    c = _bcr(net, c, f"{n}.branch3x3dbl_2", 96, 3, 1, 1)
    c = _bcr(net, c, f"{n}.branch3x3dbl_3", 96, 3, 1, 1)
    d = net.pool(x, f"{n}.branch_pool.avg", 3, 1, 1, op="avg")
    d = _bcr(net, d, f"{n}.branch_pool", pool_features, 1)
    return net.concat([a, b, c, d], f"{n}.concat")


def _inception_b(net, x, n):
    a = _bcr(net, x, f"{n}.branch3x3", 384, 3, 2)
    b = _bcr(net, x, f"{n}.branch3x3dbl_1", 64, 1)
    b = _bcr(net, b, f"{n}.branch3x3dbl_2", 96, 3, 1, 1)
    b = _bcr(net, b, f"{n}.branch3x3dbl_3", 96, 3, 2)
    c = net.pool(x, f"{n}.branch_pool", 3, 2)
    return net.concat([a, b, c], f"{n}.concat")


def _inception_c(net, x, n, c7):
    a = _bcr(net, x, f"{n}.branch1x1", 192, 1)
    b = _bcr(net, x, f"{n}.branch7x7_1", c7, 1)
    b = _bcr(net, b, f"{n}.branch7x7_2", c7, (1, 7), 1, (0, 3))
    b = _bcr(net, b, f"{n}.branch7x7_3", 192, (7, 1), 1, (3, 0))
    c = _bcr(net, x, f"{n}.branch7x7dbl_1", c7, 1)
    c = _bcr(net, c, f"{n}.branch7x7dbl_2", c7, (7, 1), 1, (3, 0))
    c = _bcr(net, c, f"{n}.branch7x7dbl_3", c7, (1, 7), 1, (0, 3))
    c = _bcr(net, c, f"{n}.branch7x7dbl_4", c7, (7, 1), 1, (3, 0))
    c = _bcr(net, c, f"{n}.branch7x7dbl_5", 192, (1, 7), 1, (0, 3))
    d = net.pool(x, f"{n}.branch_pool.avg", 3, 1, 1, op="avg")
    d = _bcr(net, d, f"{n}.branch_pool", 192, 1)
    return net.concat([a, b, c, d], f"{n}.concat")


def _inception_d(net, x, n):
    a = _bcr(net, x, f"{n}.branch3x3_1", 192, 1)
    a = _bcr(net, a, f"{n}.branch3x3_2", 320, 3, 2)
    b = _bcr(net, x, f"{n}.branch7x7x3_1", 192, 1)
    b = _bcr(net, b, f"{n}.branch7x7x3_2", 192, (1, 7), 1, (0, 3))
    b = _bcr(net, b, f"{n}.branch7x7x3_3", 192, (7, 1), 1, (3, 0))
    b = _bcr(net, b, f"{n}.branch7x7x3_4", 192, 3, 2)
    c = net.pool(x, f"{n}.branch_pool", 3, 2)
    return net.concat([a, b, c], f"{n}.concat")


def _inception_e(net, x, n):
    a = _bcr(net, x, f"{n}.branch1x1", 320, 1)
    b = _bcr(net, x, f"{n}.branch3x3_1", 384, 1)
    b = net.concat([_bcr(net, b, f"{n}.branch3x3_2a", 384, (1, 3), 1, (0, 1)),
                    _bcr(net, b, f"{n}.branch3x3_2b", 384, (3, 1), 1, (1, 0))],
                   f"{n}.branch3x3.concat")
    c = _bcr(net, x, f"{n}.branch3x3dbl_1", 448, 1)
    c = _bcr(net, c, f"{n}.branch3x3dbl_2", 384, 3, 1, 1)
    c = net.concat([_bcr(net, c, f"{n}.branch3x3dbl_3a", 384, (1, 3), 1, (0, 1)),
                    _bcr(net, c, f"{n}.branch3x3dbl_3b", 384, (3, 1), 1, (1, 0))],
                   f"{n}.branch3x3dbl.concat")
    d = net.pool(x, f"{n}.branch_pool.avg", 3, 1, 1, op="avg")
    d = _bcr(net, d, f"{n}.branch_pool", 192, 1)
    return net.concat([a, b, c, d], f"{n}.concat")


@register("inception_v3")
def inception_v3(image=299, classes=1000, aux=False):
    """Inception v3 (Szegedy et al., "Rethinking the Inception Architecture for Computer
    Vision", CVPR 2016), as its reference implementations build it (torchvision's
    inception_v3): convolutions with batch normalisation, factorised 7x7 and 3x3 modules;
    `aux` adds the auxiliary classifier used in training (and its loss)."""
    name = "inception_v3"
    check_int(name, "classes", classes)
    check_int(name, "image", image, 75)
    shape = (3, image, image)
    net = Net()
    x = net.input(shape)
    x = _bcr(net, x, "Conv2d_1a_3x3", 32, 3, 2)
    x = _bcr(net, x, "Conv2d_2a_3x3", 32, 3)
    x = _bcr(net, x, "Conv2d_2b_3x3", 64, 3, 1, 1)
    x = net.pool(x, "maxpool1", 3, 2)
    x = _bcr(net, x, "Conv2d_3b_1x1", 80, 1)
    x = _bcr(net, x, "Conv2d_4a_3x3", 192, 3)
    x = net.pool(x, "maxpool2", 3, 2)
    x = _inception_a(net, x, "Mixed_5b", 32)
    x = _inception_a(net, x, "Mixed_5c", 64)
    x = _inception_a(net, x, "Mixed_5d", 64)
    x = _inception_b(net, x, "Mixed_6a")
    for n, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        x = _inception_c(net, x, n, c7)
    if aux:
        y = net.pool(x, "AuxLogits.avgpool", 5, 3, op="avg")
        y = _bcr(net, y, "AuxLogits.conv0", 128, 1)
        y = _bcr(net, y, "AuxLogits.conv1", 768, 5)
        y = net.pool(y, "AuxLogits.global_avgpool", op="avg")
        y = net.linear(net.flatten(y), "AuxLogits.fc", classes)
        net.loss(y, "AuxLogits.loss")
    x = _inception_d(net, x, "Mixed_7a")
    x = _inception_e(net, x, "Mixed_7b")
    x = _inception_e(net, x, "Mixed_7c")
    x = net.pool(x, "avgpool", op="avg")
    x = net.act(net.flatten(x), "dropout", "dropout")
    x = net.linear(x, "fc", classes)
    net.loss(x)
    return net.model(name, input_shape=shape,
                     source="Szegedy et al.: Rethinking the Inception Architecture for "
                            "Computer Vision, CVPR 2016")
