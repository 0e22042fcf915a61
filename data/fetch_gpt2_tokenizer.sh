#!/bin/bash
echo "tokenizer: not yet"
