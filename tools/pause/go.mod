// The node tier's pod sandbox process (tools/setup-node.sh makes the image containerd uses as sandbox_image).
module apprafter.local/tools/pause

go 1.24
